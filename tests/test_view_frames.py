"""`meshemu view` without a lab: what it makes of the medium's answers (air
rates, links and their windowed delivery ratio), the radio ranges, the
names of the page's captures, and its refusal of a lab that is not up."""

from __future__ import annotations

import re
import subprocess
import sys

from meshemu.topology import load_topology
from meshemu.view.frames import LINK_WINDOW_S, FrameMaker, Snapshot, retries
from meshemu.view.live import new_capture_file
from meshemu.view.ranges import radio_ranges

from conftest import TOPOLOGIES

NAMES = ["a", "b", "c"]
COUNTERS = {"busy_ns": 0, "queue_len": 0, "retry_drops": 0, "queue_drops": 0, "link_drops": 0,
            "data_attempts_hist": [0] * 16, "rts_attempts_hist": [0] * 16}


def counters(**fields):
    return {**COUNTERS, **fields}


def peer(node, acked=0, failed=0, power_mdbm=0):
    return {"node": node, "tx_acked": acked, "tx_failed": failed, "rx_frames": 0, "last_rx_power_mdbm": power_mdbm,
            "last_sinr_mdb": 0, "mac_address": "02:00:00:00:00:00"}


def link(a, b, rx=True, power=-70.0):
    return {"a": a, "b": b, "in_rx_range": rx, "in_cs_range": True, "rx_power_dbm": power}


POSITIONS = {"a": [0.0, 0.0, 0.0], "b": [100.0, 0.0, 0.0], "c": [200.0, 0.0, 1.5]}


def snapshot(time_s, stats, links):
    return Snapshot(int(time_s * 1e9), POSITIONS, {name: stats.get(name, counters()) for name in NAMES}, links)


def test_retries_count_every_attempt_after_the_first_of_data_and_rts():
    assert retries(counters(data_attempts_hist=[5, 2, 1] + [0] * 13, rts_attempts_hist=[0, 0, 0, 1] + [0] * 12)) == 7


def test_air_rates_are_per_second_since_the_previous_frame():
    maker = FrameMaker(NAMES)
    first = maker.frame(snapshot(1.0, {}, []))
    assert first["air"][0] == [0.0, 0, 0.0, 0.0, 0.0, 0.0] and first["pos"][2] == [200.0, 0.0]
    busy = counters(busy_ns=125_000_000, queue_len=3, retry_drops=1, queue_drops=2, link_drops=1,
                    data_attempts_hist=[0, 1] + [0] * 14)
    second = maker.frame(snapshot(1.25, {"a": busy}, []))
    assert second["t"] == 1.25
    assert second["air"][0] == [0.5, 3, 4.0, 4.0, 8.0, 4.0]
    assert second["air"][1] == [0.0, 0, 0.0, 0.0, 0.0, 0.0]


def test_a_link_is_a_pair_in_receive_range_with_the_delivery_ratio_of_its_recent_unicast_frames():
    maker = FrameMaker(NAMES)
    links = [link(0, 1, power=-60.0), link(1, 0), link(1, 2), link(2, 1, rx=False), link(0, 2, rx=False)]
    frame = maker.frame(snapshot(0.0, {}, links))
    # No unicast yet: no ratio; the model's median power; a-b both ways, b-c one way; a-c not a link.
    assert frame["links"] == [[0, 1, None, -60.0, True], [1, 2, None, -70.0, False]]
    stats = {"a": counters(peers=[peer("b", acked=3, failed=1)]),
             "b": counters(peers=[peer("a", acked=4, power_mdbm=-55_500)])}
    frame = maker.frame(snapshot(1.0, stats, links))
    assert frame["links"][0] == [0, 1, 0.875, -55.5, True]  # 7 of 8 both ways; the measured power
    # Past the window the old frames no longer count: 2 more acknowledged, none failed.
    later = {"a": counters(peers=[peer("b", acked=5, failed=1)]), "b": counters(peers=[peer("a", acked=4)])}
    maker.frame(snapshot(1.0 + LINK_WINDOW_S, later, links))
    frame = maker.frame(snapshot(1.5 + LINK_WINDOW_S, later, links))
    assert frame["links"][0][2] == 1.0
    frame = maker.frame(snapshot(2.0 + 2 * LINK_WINDOW_S, later, links))
    assert frame["links"][0][2] is None


def test_the_ranges_of_ns2_wavelan_are_250_m_and_550_m():
    ranges = radio_ranges(load_topology(TOPOLOGIES / "chain7.yaml").lab_config("x", "/nonexistent"))
    assert len(ranges) == 8 and all(r == ranges[0] for r in ranges)
    assert abs(ranges[0]["rx_m"] - 250) < 0.1 and abs(ranges[0]["cs_m"] - 550) < 0.1


def test_the_view_of_a_lab_that_is_not_up_is_a_clear_error():
    result = subprocess.run([sys.executable, "-m", "meshemu", "view", "--lab", "nosuchlab"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("meshemu: lab 'nosuchlab' is not up") and "Traceback" not in result.stderr


def test_a_capture_from_the_page_never_replaces_an_earlier_file(tmp_path):
    first = new_capture_file(tmp_path, "lab")
    assert first.parent == tmp_path.resolve() and re.fullmatch(r"air-lab-\d{8}-\d{6}\.pcap", first.name)
    first.write_bytes(b"")
    second = new_capture_file(tmp_path, "lab")
    second.write_bytes(b"")
    # Within the same second: a new name; in the next one, the next second's name.
    assert second != first and new_capture_file(tmp_path, "lab") not in (first, second)
