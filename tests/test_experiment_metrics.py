"""Metrics from tool outputs, by hand: TCP goodput from tcp_info samples,
radio and kernel counter deltas, the lateness flag, flattening for CSV."""

from __future__ import annotations

import pytest

from meshemu import kernelstats
from meshemu.experiment import metrics
from meshemu.experiment.results import ResultsDir, flatten_record

S = 1_000_000_000


def sample(t_s: float, acked: int, sent: int, sport: int = 40000, dport: int = 5201, **extra) -> dict:
    row = {"time_ns": int(t_s * S), "src": "10.0.0.1", "sport": sport, "dport": dport, "state": 1,
           "bytes_acked": acked, "bytes_sent": sent, "bytes_retrans": sent - acked, "total_retrans": 0,
           "segs_out": sent // 1000, "mss": 1000, "srtt_us": 20_000, "cwnd": 10, "rto_us": 220_000}
    row.update(extra)
    return row


def test_tcp_goodput_counts_bytes_acked_inside_the_window_on_the_data_connection():
    samples = [
        sample(0.5, 1, 1, sport=39999),  # iperf3's control connection, same port
        sample(0.9, 0, 0, state=2),  # the data connection in SYN_SENT
        sample(1.0, 1, 1),
        sample(2.0, 100_001, 120_001, total_retrans=3),
        sample(3.0, 250_001, 280_001, total_retrans=5),
        sample(3.5, 300_001, 330_001, total_retrans=5),
    ]
    found = metrics.tcp_metrics(samples, 5201, (int(2.0 * S), int(3.0 * S)))
    # Over [2 s, 3 s]: 150 000 bytes acknowledged, 160 000 sent.
    assert found["goodput_bps"] == pytest.approx(150_000 * 8)
    assert found["throughput_bps"] == pytest.approx(160_000 * 8)
    assert found["retransmits"] == 2
    assert found["rtt_ms"]["mean"] == pytest.approx(20.0)
    # A window that starts before the connection: the count starts at 0.
    early = metrics.tcp_metrics(samples, 5201, (0, int(3.5 * S)))
    assert early["bytes_acked"] == 300_001
    assert "error" in metrics.tcp_metrics(samples, 5999, (0, S))


def test_tcp_throughput_is_not_below_goodput_when_the_flight_shrinks_over_the_window():
    # Reno at the window's start with 40 segments in flight, at its end with
    # 8 (after a halving and a drain), no retransmission in between: 100 000
    # bytes acknowledged but only 68 000 newly sent. Counted from bytes sent,
    # throughput would be 0.68 of goodput (the 2-hop lab test saw 0.89).
    samples = [sample(1.0, 10_001, 50_001, bytes_retrans=0, unacked=40),
               sample(2.0, 110_001, 118_001, bytes_retrans=0, unacked=8)]
    found = metrics.tcp_metrics(samples, 5201, (int(1.0 * S), int(2.0 * S)))
    assert found["goodput_bps"] == pytest.approx(100_000 * 8)
    assert found["throughput_bps"] == pytest.approx(found["goodput_bps"])
    assert found["bytes_sent"] == 68_000
    # 3 000 bytes retransmitted in the window count once more.
    samples[1]["bytes_retrans"] = 3_000
    assert metrics.tcp_metrics(samples, 5201, (int(1.0 * S), int(2.0 * S)))["throughput_bps"] == \
        pytest.approx(103_000 * 8)


def iperf3_interval(start: float, packets: int, lost: int, jitter_ms: float) -> dict:
    return {"sum": {"start": start, "end": start + 1.0, "seconds": 1.0, "bytes": (packets - lost) * 1000,
                    "packets": packets, "lost_packets": lost, "jitter_ms": jitter_ms}}


def test_iperf3_udp_loss_and_jitter_cover_the_same_intervals_as_goodput():
    # Heavy loss in the first second (before the window), none after.
    server = {"intervals": [iperf3_interval(0.0, 100, 90, 30.0), iperf3_interval(1.0, 100, 0, 2.0),
                            iperf3_interval(2.0, 100, 10, 4.0)],
              "end": {"sum": {"lost_percent": 33.3, "jitter_ms": 4.0}}}
    found = metrics.iperf3_udp_metrics(server, (1.0, 3.0))
    assert found["intervals"] == 2
    assert found["goodput_bps"] == pytest.approx(190 * 1000 * 8 / 2)
    assert found["packets_received"] == 190
    assert found["loss"] == pytest.approx(10 / 200)
    assert found["jitter_ms"] == pytest.approx(3.0)


def test_medium_metrics_are_deltas_with_derived_figures():
    before = {"n0": {"tx_data_frames": 10, "retry_drops": 1, "backoffs": 5, "busy_ns": 0, "rts_attempts": 12,
                     "queue_len": 3, "queue_len_max": 7, "rts_attempts_hist": [10, 2] + [0] * 14,
                     "peers": []}}
    after = {"n0": {"tx_data_frames": 100, "retry_drops": 11, "backoffs": 205, "busy_ns": 1 * S,
                    "rts_attempts": 150, "queue_len": 0, "queue_len_max": 9, "rts_attempts_hist": [80, 30] + [0] * 14,
                    "peers": []},
             "n1": {"tx_data_frames": 0, "retry_drops": 0, "backoffs": 0, "busy_ns": 3 * S, "rts_attempts": 0,
                    "queue_len": 0, "queue_len_max": 0, "rts_attempts_hist": [0] * 16, "peers": []}}
    found = metrics.medium_metrics(before, after, seconds=4.0)
    n0 = found["nodes"]["n0"]
    assert (n0["tx_data_frames"], n0["retry_drops"], n0["queue_len_max"]) == (90, 10, 9)
    assert n0["mac_drop_fraction"] == pytest.approx(10 / 100)  # 10 dropped of 90 + 10 frames
    assert n0["backoffs_per_s"] == pytest.approx(50)
    assert n0["busy_fraction"] == pytest.approx(0.25)
    assert n0["rts_attempts_hist"][:2] == [70, 28]
    total = found["total"]
    assert total["busy_fraction"] == pytest.approx((0.25 + 0.75) / 2)
    assert total["rts_attempts"] == 138 and total["queue_len_max"] == 9
    assert total["rts_per_frame"] == pytest.approx(138 / 100)


SNMP = """\
Ip: Forwarding DefaultTTL InReceives InHdrErrors ForwDatagrams OutNoRoutes
Ip: 1 64 120 0 40 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens CurrEstab OutSegs
Tcp: 1 200 120000 -1 2 1 75
IpExt: InNoRoutes InTruncatedPkts
IpExt: 3 0
"""


def test_kernel_counters_parse_to_groups_of_the_non_zero_ones():
    assert kernelstats.parse(SNMP) == {
        "Ip": {"Forwarding": 1, "DefaultTTL": 64, "InReceives": 120, "ForwDatagrams": 40},
        "Tcp": {"RtoAlgorithm": 1, "RtoMin": 200, "RtoMax": 120000, "MaxConn": -1, "ActiveOpens": 2,
                "CurrEstab": 1, "OutSegs": 75},
        "IpExt": {"InNoRoutes": 3}}
    with pytest.raises(ValueError, match="do not pair up"):
        kernelstats.parse("Ip: Forwarding DefaultTTL\nIp: 1\n")
    with pytest.raises(ValueError, match="do not pair up"):
        kernelstats.parse("Ip: Forwarding\nTcp: 1\n")


def test_kernel_metrics_are_per_node_deltas_without_settings_and_their_sums():
    before = {"n0": kernelstats.parse(SNMP), "n1": {}}
    after = {"n0": {"Ip": {"Forwarding": 1, "DefaultTTL": 64, "InReceives": 150, "ForwDatagrams": 40},
                    "Tcp": {"RtoMin": 200, "CurrEstab": 0, "OutSegs": 90}, "IpExt": {"InNoRoutes": 5}},
             "n1": {"Ip": {"ForwDatagrams": 12}, "IpExt": {"InNoRoutes": 1}}}
    moved = kernelstats.metrics(before, after)
    assert moved["nodes"] == {"n0": {"Ip": {"InReceives": 30}, "Tcp": {"OutSegs": 15}, "IpExt": {"InNoRoutes": 2}},
                              "n1": {"Ip": {"ForwDatagrams": 12}, "IpExt": {"InNoRoutes": 1}}}
    assert moved["total"] == {"Ip": {"InReceives": 30, "ForwDatagrams": 12}, "Tcp": {"OutSegs": 15},
                              "IpExt": {"InNoRoutes": 3}}


def test_behind_real_time_bounds():
    assert not metrics.behind_real_time({"count": 10, "p99_ns": 900_000, "max_ns": 9_000_000})
    assert metrics.behind_real_time({"count": 10, "p99_ns": 1_100_000, "max_ns": 2_000_000})
    assert metrics.behind_real_time({"count": 10, "p99_ns": 10_000, "max_ns": 11_000_000})
    assert not metrics.behind_real_time(None)


def test_meshemu_udp_loss_uses_the_senders_window_count():
    receiver = [{"type": "interval", "bytes": 10}, {"type": "flow", "packets": 95, "bytes": 95_000,
                                                    "goodput_bps": 760_000.0, "jitter_ns": 2_000_000,
                                                    "reordered": 1, "duplicates": 0,
                                                    "delay": {"min_ns": 1_000_000, "p50_ns": 5_000_000}}]
    sender = {"window_packets": 100, "rate_bps": 800_000, "send_errors": 0}
    found = metrics.meshemu_udp_metrics(receiver, sender)
    assert found["loss"] == pytest.approx(0.05)
    assert found["delay_ms"] == {"min": 1.0, "p50": 5.0} and found["jitter_ms"] == 2.0


def test_records_flatten_with_flows_by_name():
    record = {"run_id": "abc", "experiment": "e", "params": {"topology.generate.n": 3}, "seed": 2,
              "behind_real_time": False, "duration_s": 12.0, "lateness": {"p99_ns": 5, "max_ns": 9},
              "metrics": {"flows": [{"name": "tcp", "goodput_bps": 1.0, "rtt_ms": {"mean": 3.0}}],
                          "medium": {"total": {"retry_drops": 4, "rts_attempts_hist": [1, 2]}},
                          "routing": {"control_bytes": 0},
                          "kernel": {"nodes": {}, "total": {"Ip": {"ForwDatagrams": 7}}}}}
    row = flatten_record(record)
    assert row["params.topology.generate.n"] == 3 and row["seed"] == 2
    assert row["flows.tcp.goodput_bps"] == 1.0 and row["flows.tcp.rtt_ms.mean"] == 3.0
    assert row["medium.retry_drops"] == 4 and row["medium.rts_attempts_hist"] == "[1, 2]"
    assert row["routing.control_bytes"] == 0 and row["lateness.p99_ns"] == 5
    assert row["kernel.Ip.ForwDatagrams"] == 7


def test_a_drivers_records_count_records_from_before_drivers_as_lab_runs(tmp_path):
    results = ResultsDir(tmp_path)
    for run_id, driver in (("old", None), ("lab", "lab"), ("ns", "ns2")):
        results.append({"run_id": run_id, **({"driver": driver} if driver else {})})
    assert [r["run_id"] for r in results.driver_records("lab")] == ["old", "lab"]
    assert [r["run_id"] for r in results.driver_records("ns2")] == ["ns"]
    assert ResultsDir(tmp_path / "missing").driver_records("lab") == []


def test_the_flows_of_a_group_add_up_where_every_one_has_the_figure():
    flows = [{"name": "sat-n1", "group": "sat", "goodput_bps": 1.0, "loss": 0.5, "packets_sent": 4},
             {"name": "sat-n2", "group": "sat", "goodput_bps": 2.0, "loss": 0.1},
             {"name": "alone", "goodput_bps": 8.0}]
    row = flatten_record({"run_id": "abc", "metrics": {"flows": flows}})
    assert row["groups.sat.flows"] == 2 and row["groups.sat.goodput_bps"] == 3.0
    assert "groups.sat.loss" not in row and "groups.sat.packets_sent" not in row  # not additive / not in every flow
    assert "groups.alone.flows" not in row and row["flows.sat-n1.goodput_bps"] == 1.0
