"""Mistakes in topology files: each is reported as FILE:LINE:COL: path: problem,
and nothing is created."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import namespaces
from meshemu.errors import ConfigError
from meshemu.lab import Lab
from meshemu.state import RUN_ROOT
from meshemu.topology import load_topology

CHAIN = "name: vt\ngenerate: {kind: chain, n: 3, spacing: 200m}\n"

# id: (file text, line, column or None, field path, fragment of the message)
CASES = {
    "unknown key": (CHAIN + "radio: {tx_pwr: 20dBm}\n", 3, 9, "radio.tx_pwr", "unknown key 'tx_pwr' (did you mean 'tx_power'?)"),
    "unknown top-level key": (CHAIN + "nodez: {}\n", 3, 1, "nodez", "unknown key 'nodez'"),
    "wrong type": ("name: vt\ngenerate: {kind: chain, n: eight, spacing: 200m}\n", 2, 28, "generate.n", "valid integer"),
    "bad unit": ("name: vt\ngenerate: {kind: chain, n: 3, spacing: 200mi}\n", 2, 40, "generate.spacing",
                 "unknown unit 'mi' for a length"),
    "missing unit": ("name: vt\ngenerate: {kind: chain, n: 3, spacing: 200}\n", 2, 40, "generate.spacing", "missing unit"),
    "negative distance": ("name: vt\ngenerate: {kind: chain, n: 3, spacing: -200m}\n", 2, 40, "generate.spacing",
                          "must be positive"),
    "negative time": (CHAIN + "radio:\n  slot: -20us\n", 4, 9, "radio.slot", "must be positive"),
    "bad position": (CHAIN + "nodes:\n  x: {position: [1m]}\n", 4, 17, "nodes.x.position",
                     "expected [x, y] or [x, y, z] in metres"),
    "duplicate node name": (CHAIN + "nodes:\n  x: {position: [0m, 10m]}\n  x: {position: [0m, 20m]}\n", 5, 3, "nodes.x",
                            "duplicate node name 'x' (first defined at line 4)"),
    "duplicate address": (CHAIN + "nodes:\n  x: {position: [0m, 10m], ipv4: 10.0.0.2}\n", 4, 34, "nodes.x.ipv4",
                          "duplicate address 10.0.0.2 (n1 and x)"),
    "address outside subnet": (CHAIN + "subnet: 10.1.0.0/24\nnodes:\n  x: {position: [0m, 10m], ipv4: 10.0.0.9}\n", 5, 34,
                               "nodes.x.ipv4", "10.0.0.9 is outside the subnet 10.1.0.0/24"),
    "subnet too small": ("name: vt\nsubnet: 10.0.0.0/30\ngenerate: {kind: chain, n: 3, spacing: 200m}\n", 2, 9,
                         "subnet", "has 2 host addresses, too few for 3 nodes"),
    "node outside area": (CHAIN + "area: {min: [0m, 0m], max: [300m, 300m]}\n", 2, 11, "generate",
                          "node n2 at (400, 0) is outside the area [0, 0] to [300, 300]"),
    "unknown profile": (CHAIN + "profile: wavelan\n", 3, 10, "profile", "unknown profile 'wavelan'; available: 80211g, ns2-wavelan"),
    "cs above rx threshold": (CHAIN + "radio: {cs_threshold: -60dBm}\n", 3, 23, "radio.cs_threshold",
                              "cs_threshold (-60.00 dBm) is above rx_threshold (-64.37 dBm)"),
    "rx threshold below the profile's cs threshold": (CHAIN + "radio: {rx_threshold: -80dBm}\n", 3, 23, "radio.rx_threshold",
                                                      "cs_threshold (-78.07 dBm) is above rx_threshold (-80.00 dBm)"),
    "cw_min above cw_max": (CHAIN + "defaults:\n  radio: {cw_min: 63, cw_max: 31}\n", 4, 19, "defaults.radio.cw_min",
                            "cw_min (63) is above cw_max (31)"),
    "rate not of the phy": (CHAIN + "nodes:\n  n1: {radio: {data_rate: 54Mbps}}\n", 4, 27, "nodes.n1.radio.data_rate",
                            "54 Mbit/s is not a dsss rate"),
    "basic rate not of the phy": (CHAIN + "radio: {basic_rate: 6Mbps}\n", 3, 21, "radio.basic_rate",
                                  "6 Mbit/s is not a dsss rate (use 1Mbps, 2Mbps, 5.5Mbps, 11Mbps, or another phy)"),
    "phy without the profile's rates": (CHAIN + "nodes:\n  n1: {radio: {phy: ofdm}}\n", 4, 21, "nodes.n1.radio.phy",
                                        "2 Mbit/s is not a ofdm rate"),
    "interference floor above cs threshold": (CHAIN + "radio: {interference_floor: -70dBm}\n", 3, 29,
                                              "radio.interference_floor",
                                              "interference_floor (-70.00 dBm) is above cs_threshold (-78.07 dBm)"),
    "tdma slot too short": (CHAIN + "mac: {tdma: {slot: 1ms}}\n", 3, 6, "mac", "1000000 ns is too short"),
    "generator needs an area": ("name: vt\ngenerate: {kind: random, n: 5}\n", 2, 11, "generate",
                                "the random generator places nodes in the area"),
    "random waypoint needs an area": (CHAIN + "mobility: {model: random_waypoint, speed: [1m/s, 5m/s]}\n", 3, 11,
                                      "mobility", "random_waypoint moves nodes inside the area"),
    "unknown node in links": (CHAIN + "links:\n  - {a: n0, b: n9, extra_loss: 10dB}\n", 4, 16, "links[0].b",
                              "unknown node 'n9'"),
    "unknown mobility model": (CHAIN + "mobility: {model: teleport}\n", 3, 11, "mobility", "does not match any of the expected tags"),
    "bad lab name": ("name: Lab_1\ngenerate: {kind: chain, n: 3, spacing: 200m}\n", 1, 7, "name", "bad lab name 'Lab_1'"),
    "new node without position": (CHAIN + "nodes:\n  x: {promiscuous: true}\n", 4, 6, "nodes.x", "position is required"),
    "YAML syntax": (CHAIN + "radio: {tx_power: 20dBm\n", 4, 1, "", "YAML syntax error"),
    "no nodes": ("name: vt\n", 1, 1, "", "no nodes"),
    "spin too long": (CHAIN + "realtime: {spin: 2ms}\n", 3, 11, "realtime", "spin must be at most 1ms, got 2000us"),
    "bad scheduling choice": (CHAIN + "realtime: {sched_fifo: always}\n", 3, 24, "realtime.sched_fifo",
                              "expected true, false or auto, got 'always'"),
    "unknown ARP choice": (CHAIN + "arp: never\n", 3, 6, "arp", "'kernel' or 'resolve_once'"),
}


def _created(name: str) -> list[str]:
    found = [str(path) for path in (RUN_ROOT / name, Path("/etc/netns") / f"{name}-n0") if path.exists()]
    return found + sorted(ns for ns in namespaces() if ns.startswith(f"{name}-"))


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_mistake_is_located_and_nothing_is_created(write, case):
    text, line, column, path, fragment = CASES[case]
    file = write("topo.yaml", text)
    with pytest.raises(ConfigError) as caught:
        Lab.from_file(file).up()
    matching = [p for p in caught.value.problems if p.path == path and fragment in p.message]
    assert matching, f"no problem at {path!r} mentioning {fragment!r} in:\n{caught.value}"
    problem = matching[0]
    assert (problem.file, problem.line) == (str(file), line), str(problem)
    if column is not None:
        assert problem.column == column, str(problem)
    prefix = f"{file}:{line}:{problem.column}: " + (f"{path}: " if path else "")
    assert str(problem).startswith(prefix)
    assert _created("vt") == []


def test_every_problem_is_reported_at_once(write):
    file = write("topo.yaml", CHAIN + "radio: {tx_pwr: 1, slot: 20}\nseed: -1\n")
    with pytest.raises(ConfigError) as caught:
        load_topology(file)
    assert [p.path for p in caught.value.problems] == ["radio.tx_pwr", "radio.slot", "seed"]


def test_errors_in_a_profile_override_name_the_most_specific_place(write):
    file = write("topo.yaml", CHAIN + "radio: {rx_threshold: -70dBm}\ndefaults:\n  radio: {cs_threshold: -65dBm}\n")
    with pytest.raises(ConfigError) as caught:
        load_topology(file)
    [problem] = caught.value.problems
    assert (problem.line, problem.path) == (5, "defaults.radio.cs_threshold")


def placement_problem(write, text):
    with pytest.raises(ConfigError) as caught:
        load_topology(write("topo.yaml", text))
    [problem] = caught.value.problems
    assert (problem.line, problem.path) == (3, "generate")
    return problem.message


def test_random_generator_that_cannot_connect(write):
    message = placement_problem(write, "name: vt\narea: {min: [0m, 0m], max: [100km, 100km]}\n"
                                       "generate: {kind: random, n: 10, max_attempts: 3}\n")
    assert message.startswith("no connected placement of 10 nodes found in 3 attempts with seed 1 (nor in the "
                              "first 10000, the most a file may ask for")
    assert "add nodes, shrink the area or enlarge the radio range" in message


def test_a_placement_beyond_max_attempts_is_named(write):
    text = "name: vt\narea: {min: [0m, 0m], max: [1000m, 1000m]}\ngenerate: {kind: random, n: 30, max_attempts: 5}\n" \
           "seed: 10\n"
    message = placement_problem(write, text)
    assert message.endswith("attempts with seed 10: attempt 10 is the first connected one: set max_attempts: 10, "
                            "or choose another seed")
    assert len(load_topology(write("ten.yaml", text.replace("max_attempts: 5", "max_attempts: 10"))).nodes) == 30


def test_redrawing_cannot_connect_nodes_that_random_waypoint_places(write):
    """Random waypoint draws the nodes' positions at time 0 from the seed:
    the generator's draws cannot change them, so one look decides."""
    started = time.perf_counter()
    message = placement_problem(write, "name: vt\narea: {min: [0m, 0m], max: [1500m, 300m]}\n"
                                       "generate: {kind: strip, n: 50, length: 1500m, width: 300m, max_attempts: 1000}\n"
                                       "mobility: {model: random_waypoint, speed: [1m/s, 2m/s]}\nseed: 8\n")
    assert time.perf_counter() - started < 2
    assert "redrawing cannot connect them" in message
    assert message.endswith("has 49 of the 50 nodes: choose another seed, or connected: false")


def test_cli_up_reports_one_line_per_problem_without_traceback(write):
    file = write("topo.yaml", CHAIN + "radio: {tx_pwr: 20dBm}\nprofile: nope\n")
    result = subprocess.run([sys.executable, "-m", "meshemu", "up", str(file)], capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{file}:3:9: radio.tx_pwr: unknown key 'tx_pwr' (did you mean 'tx_power'?)",
        f"{file}:4:10: profile: unknown profile 'nope'; available: 80211g, ns2-wavelan",
    ]
    assert _created("vt") == []
