"""A topology resolves to exactly the configuration of emulator/README.md §1."""

import copy
import json
import re
from pathlib import Path

import pytest

from meshemu import medium
from meshemu.topology import load_topology

TINY = """\
name: tiny
profile: 80211g
seed: 7
mac: {tdma: {slot: 6ms}}
subnet: 192.168.5.0/24
radio: {tx_power: 100mW, rts_threshold: 500B}
defaults: {promiscuous: true}
nodes:
  a: {position: [0m, 0m]}
  b:
    position: [100, 50m, 2]
    ipv4: 192.168.5.20
    promiscuous: false
    radio:
      propagation: {model: shadowing, exponent: 2.7, reference_distance: 1m, sigma: 4dB, per: link}
      bit_error_rate: 1e-6
    mobility: {model: setdest, moves: [{at: 1s, to: [10m, 0m], speed: 36km/h}]}
links:
  - {a: a, b: b, extra_loss: 6dB}
"""


def radio(**changes):
    base = {
        "phy": "ofdm", "data_rate_bps": 54_000_000, "basic_rate_bps": 6_000_000, "preamble": "short",
        "signal_extension_ns": 6000, "frequency_hz": 2437e6, "tx_power_dbm": 20.0, "antenna_gain_dbi": 0.0,
        "antenna_height_m": 1.5, "system_loss_db": 0.0,
        "propagation": {"model": "log_distance", "exponent": 3.0, "reference_distance_m": 1.0},
        "rx_threshold_dbm": -65.0, "cs_threshold_dbm": -82.0, "capture_threshold_db": 10.0, "capture_restart": True,
        "noise_floor_dbm": -95.0, "interference_floor_dbm": -92.0, "bit_error_rate": 0.0, "slot_ns": 9000,
        "sifs_ns": 10000, "cw_min": 15, "cw_max": 1023, "rts_threshold_bytes": 500, "short_retry_limit": 7,
        "long_retry_limit": 4, "queue_len": 100, "queue_priority": True, "eifs_nav": False,
        "receive_during_tx": False, "responses_need_idle": False, "retry_drop_flush": False,
    }
    return {**base, **changes}


EXPECTED = {
    "seed": 7,
    "mac": {"kind": "tdma", "slot_ns": 6_000_000},
    "nodes": [
        {"name": "a", "mac_address": "02:00:00:00:00:01", "position": [0.0, 0.0, 0.0], "promiscuous": True,
         "mobility": {"kind": "static"}, "radio": radio()},
        {"name": "b", "mac_address": "02:00:00:00:00:02", "position": [100.0, 50.0, 2.0], "promiscuous": False,
         "mobility": {"kind": "setdest", "moves": [{"t_ns": 1_000_000_000, "target": [10.0, 0.0, 0.0],
                                                    "speed_mps": 10.0}]},
         "radio": radio(propagation={"model": "shadowing", "exponent": 2.7, "reference_distance_m": 1.0,
                                     "sigma_db": 4.0, "per": "link"}, bit_error_rate=1e-6)},
    ],
    "links": [{"a": 0, "b": 1, "extra_loss_db": 6.0}],
}


def test_topology_resolves_to_the_section_1_json(write):
    topology = load_topology(write("tiny.yaml", TINY))
    resolved = json.loads(json.dumps(topology.medium))  # exactly what the medium receives
    assert _approx_equal(resolved, EXPECTED)
    assert [(node.name, str(node.ipv4)) for node in topology.nodes] == [("a", "192.168.5.1"), ("b", "192.168.5.20")]


def _approx_equal(actual, expected) -> bool:
    """Equal, with floats compared to 1e-9 (unit conversions go through logs)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), (actual, expected)
        return all(_approx_equal(actual[key], expected[key]) for key in expected)
    if isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), (actual, expected)
        return all(_approx_equal(a, e) for a, e in zip(actual, expected))
    if isinstance(expected, float):
        assert actual == pytest.approx(expected, rel=1e-9, abs=1e-9), (actual, expected)
        return True
    assert type(actual) is type(expected) and actual == expected, (actual, expected)
    return True


def test_ns2_wavelan_profile_values(write):
    topology = load_topology(write("t.yaml", "generate: {kind: chain, n: 2, spacing: 200m}\n"))
    resolved = topology.medium["nodes"][0]["radio"]
    assert resolved["tx_power_dbm"] == pytest.approx(24.5, abs=1e-5)
    assert resolved["rx_threshold_dbm"] == pytest.approx(-64.3747, abs=1e-4)
    assert resolved["cs_threshold_dbm"] == pytest.approx(-78.0715, abs=1e-4)
    # ns-2's PHY drops what it cannot sense: nothing under cs adds up
    assert resolved["interference_floor_dbm"] == resolved["cs_threshold_dbm"]
    assert resolved["rts_threshold_bytes"] == 0
    assert topology.medium["mac"] == {"kind": "dcf"}
    assert topology.medium["seed"] == 1


def test_interference_floor_defaults_under_what_is_sensed_or_captured(write):
    topology = load_topology(write("t.yaml", "profile: 80211g\ngenerate: {kind: chain, n: 2, spacing: 50m}\n"))
    r = topology.medium["nodes"][0]["radio"]
    expected = min(r["cs_threshold_dbm"], r["rx_threshold_dbm"] - r["capture_threshold_db"]) - 10.0
    assert r["interference_floor_dbm"] == pytest.approx(expected, abs=1e-9)


def test_retry_drop_flush_follows_aodv_link_layer_feedback(write):
    """The medium flushes behind a failed frame for aodvd with link-layer
    feedback, unless aodvd asks for flushes itself (flush_on_break, on in
    its preset ns2)."""
    text = "generate: {kind: chain, n: 2, spacing: 200m}\nrouting: %s\n"
    cases = {"aodv": False, "{aodv: {link_layer_feedback: true}}": True, "{aodv: {preset: ns2}}": False,
             "{aodv: {preset: ns2, flush_on_break: false}}": True,
             "{aodv: {link_layer_feedback: true, flush_on_break: true}}": False,
             "{aodv: {preset: ns2, link_layer_feedback: false, hello_interval: 1s}}": False}
    for routing, flush in cases.items():
        topology = load_topology(write("t.yaml", text % routing))
        assert topology.medium["nodes"][0]["radio"]["retry_drop_flush"] is flush, routing


MODEL_CONFIG = Path(__file__).resolve().parents[1] / "emulator" / "model" / "src" / "config.rs"


def test_the_resolver_writes_every_field_of_the_models_radio(write):
    """The model's RadioConfig (its section 1 struct) and the resolver's
    keys name the same fields: a field the model defaults (serde) that the
    resolver never writes would be silently left at the default."""
    struct = re.search(r"pub struct RadioConfig \{(?P<body>.*?)\n\}", MODEL_CONFIG.read_text(), re.S)
    model_fields = set(re.findall(r"^\s*pub (\w+):", struct["body"], re.M))
    topology = load_topology(write("t.yaml", "generate: {kind: chain, n: 2, spacing: 200m}\n"))
    assert set(topology.medium["nodes"][0]["radio"]) == model_fields


def test_the_model_reads_and_checks_every_resolved_radio_key(write):
    """Each key the resolver writes is one the model takes and type-checks:
    a value of the wrong type is refused naming that key (not as unknown)."""
    topology = load_topology(write("t.yaml", "generate: {kind: chain, n: 2, spacing: 200m}\n"))
    for key in topology.medium["nodes"][0]["radio"]:
        config = copy.deepcopy(topology.medium)
        config["nodes"][0]["radio"][key] = None
        with pytest.raises(medium.ConfigRejected) as refused:
            medium.validate(config)
        assert refused.value.path == f"nodes[0].radio.{key}" and "unknown field" not in refused.value.reason, key


def test_rts_off_and_layers(write):
    topology = load_topology(write("t.yaml", """\
generate: {kind: chain, n: 3, spacing: 200m}
radio: {rts_threshold: "off", queue_len: 10}
defaults: {radio: {queue_len: 20}}
nodes:
  n2: {radio: {queue_len: 30, interference_floor: -90dBm}}
"""))
    radios = [node["radio"] for node in topology.medium["nodes"]]
    assert [r["queue_len"] for r in radios] == [20, 20, 30]
    assert {r["rts_threshold_bytes"] for r in radios} == {2**32 - 1}
    assert [r["interference_floor_dbm"] for r in radios][2] == -90.0


def test_mobility_resolution(write):
    topology = load_topology(write("t.yaml", """\
area: {min: [0m, 0m], max: [500m, 500m]}
generate: {kind: chain, n: 2, spacing: 100m}
mobility: {model: random_waypoint, speed: [1m/s, 20m/s], pause: [0s, 10s], steady_state: true}
nodes:
  w: {mobility: {model: waypoints, points: [[0s, [10m, 10m]], [10s, [100m, 10m]]]}}
"""))
    n0, _, w = topology.medium["nodes"]
    assert n0["mobility"] == {"kind": "random_waypoint", "area": {"min": [0.0, 0.0], "max": [500.0, 500.0]},
                              "speed_mps": {"min": 1.0, "max": 20.0},
                              "pause_ns": {"min": 0, "max": 10_000_000_000}, "steady_state": True}
    assert w["position"] == [10.0, 10.0, 0.0]
    assert w["mobility"] == {"kind": "waypoints", "points": [
        {"t_ns": 0, "position": [10.0, 10.0, 0.0]}, {"t_ns": 10_000_000_000, "position": [100.0, 10.0, 0.0]}]}
