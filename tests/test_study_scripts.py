"""The studies' analysis scripts (experiments/copas/analyse.py and
counters.py, experiments/re-tfrc/tables.py,
experiments/validation/ns2/frame_lengths.py, arp_watch.py, rreq_origins.py, flow_drops.py,
packet_fates.py, link_breaks.py) on small hand-made results: records with only the keys the
scripts read, run files as `meshemu run` writes them, and the expected
figures computed by hand in the comments."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import socket
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO

NODE_IP = {f"n{i}": f"10.0.0.{i + 1}" for i in range(6)}


def study_script(path: str):
    name = "study_" + Path(path).stem
    spec = importlib.util.spec_from_file_location(name, REPO / "experiments" / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


analyse = study_script("copas/analyse.py")
counters = study_script("copas/counters.py")
tables = study_script("re-tfrc/tables.py")
frame_lengths = study_script("validation/ns2/frame_lengths.py")
sys.modules["frame_lengths"] = frame_lengths  # arp_watch.py imports its sibling, as run from its directory
arp_watch = study_script("validation/ns2/arp_watch.py")
rreq_origins = study_script("validation/ns2/rreq_origins.py")
flow_drops = study_script("validation/ns2/flow_drops.py")
packet_fates = study_script("validation/ns2/packet_fates.py")
link_breaks = study_script("validation/ns2/link_breaks.py")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def markdown_rows(text: str) -> list[dict[str, str]]:
    """The rows of a printed markdown table, as {header cell: cell}."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    split = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    header, rows = split[0], split[2:]  # split[1] is the |---| line
    return [dict(zip(header, row)) for row in rows]


# --- experiments/copas/analyse.py -----------------------------------------------------------------

def tcp_flow(goodput_kbps: float, acked: int = 0, rtt_ms: float | None = None) -> dict[str, Any]:
    return {"kind": "tcp", "goodput_bps": goodput_kbps * 1e3, "bytes_acked": acked,
            "rtt_ms": None if rtt_ms is None else {"mean": rtt_ms}}


def copas_record(run_id: str, protocol: str, seed: int, flows: list[dict[str, Any]], *, connections: int = 1,
                 control_bytes: int = 1000, backoffs: int = 0, defers: int = 0, nodes: int = 2,
                 duration_s: int = 60, warmup_s: int = 10, p99_ns: int = 100_000) -> dict[str, Any]:
    return {"run_id": run_id, "seed": seed,
            "params": {"nodes": 50, "connections": connections, "protocol": protocol},
            "config": {"duration_ns": duration_s * 10**9, "warmup_ns": warmup_s * 10**9, "nodes": []},
            "metrics": {"flows": flows,
                        "medium": {"total": {"backoffs": backoffs, "defers": defers},
                                   "nodes": {f"n{i}": {} for i in range(nodes)}},
                        "routing": {"control_bytes": control_bytes}},
            "lateness": {"p99_ns": p99_ns}}


def copas_event(event: str, cause: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"event": event, **({"cause": cause} if cause else {}), **fields}


def test_aggregate_throughput_sums_only_the_tcp_flows():
    # 150 + 50 kbit/s of TCP; the UDP flow's 999 kbit/s is not a connection of the study.
    record = copas_record("r", "aodv", 1, [tcp_flow(150), tcp_flow(50),
                                           {"kind": "udp", "goodput_bps": 999e3}])
    assert analyse.aggregate_bps(record) == pytest.approx(200e3)


def test_medium_counters_are_per_node_per_second_of_the_window_after_warm_up():
    # 1000 backoffs, 3000 deferrals on 2 nodes over 60 s − 10 s warm-up: 1000 / 2 / 50 = 10, 3000 / 2 / 50 = 30.
    record = copas_record("r", "aodv", 1, [], backoffs=1000, defers=3000, nodes=2, duration_s=60, warmup_s=10)
    assert analyse.per_node_per_s(record, "backoffs") == pytest.approx(10.0)
    assert analyse.per_node_per_s(record, "defers") == pytest.approx(30.0)


def test_normalized_overhead_is_routing_bytes_per_data_byte_acknowledged():
    # 5000 control bytes / (40000 + 10000 bytes acked) = 0.1.
    record = copas_record("r", "aodv", 1, [tcp_flow(1, acked=40_000), tcp_flow(1, acked=10_000)],
                          control_bytes=5000)
    assert analyse.normalized_overhead(record) == pytest.approx(0.1)
    # Routing traffic and no byte delivered: infinitely costly, not a division error.
    starved = copas_record("r", "aodv", 1, [tcp_flow(0, acked=0)], control_bytes=5000)
    assert analyse.normalized_overhead(starved) == math.inf


def test_mean_rtt_averages_the_connections_that_measured_one():
    # (100 + 300) / 2; the connection without RTT samples is left out, not counted as 0.
    record = copas_record("r", "aodv", 1, [tcp_flow(1, rtt_ms=100.0), tcp_flow(1, rtt_ms=300.0), tcp_flow(1)])
    assert analyse.mean_rtt_ms(record) == pytest.approx(200.0)


def test_path_moves_count_contention_reroutes_and_rerr_switches(tmp_path):
    routing = tmp_path / "runs" / "r1" / "routing"
    write_jsonl(routing / "n4.copas-events.jsonl", [
        copas_event("path_selected", "discovery", role="both"),  # the first choice is no move
        copas_event("path_selected", "contention", role="forward"),  # reroute 1
        copas_event("contention_high", role="forward"),
        copas_event("path_selected", "rerr", role="forward"),  # a replacement after a RERR: no reroute
        copas_event("route_removed", reason="expired"),
    ])
    write_jsonl(routing / "n0.copas-events.jsonl", [
        copas_event("path_selected", "contention", role="both"),  # reroute 2
        copas_event("path_switched", "rerr", role="forward"),  # switch 1
        copas_event("link_broken", "link layer"),
    ])
    assert analyse.path_moves(tmp_path, {"run_id": "r1"}) == (2, 1)
    # A run without COPAS events (AODV) has no moves to report, not zero moves.
    assert analyse.path_moves(tmp_path, {"run_id": "aodv-run"}) is None


def test_table_pairs_copas_with_aodv_by_seed_and_reports_each_protocol(tmp_path, capsys):
    records = [
        # AODV, seeds 1 and 2: 200 and 100 kbit/s.
        copas_record("a1", "aodv", 1, [tcp_flow(150, acked=40_000), tcp_flow(50, acked=10_000)],
                     control_bytes=5000, backoffs=1000, defers=3000, p99_ns=200_000),
        copas_record("a2", "aodv", 2, [tcp_flow(100, acked=50_000)], control_bytes=10_000, backoffs=2000,
                     defers=3000, p99_ns=1_500_000),
        # COPAS seeds 1, 2: 100 / 200 = 0.5 and 150 / 100 = 1.5; seed 3 has no AODV run to compare with.
        # (Out of order in the file: pairing by position would divide the wrong runs.)
        copas_record("c3", "copas", 3, [tcp_flow(500, acked=1)]),
        copas_record("c2", "copas", 2, [tcp_flow(150, acked=1)]),
        copas_record("c1", "copas", 1, [tcp_flow(100, acked=1)]),
        # Another connection count is a row of its own, with no AODV baseline.
        copas_record("c4", "copas", 1, [tcp_flow(10, acked=1)], connections=5),
    ]
    write_jsonl(tmp_path / "runs.jsonl", records)
    write_jsonl(tmp_path / "runs" / "c1" / "routing" / "n1.copas-events.jsonl",
                [copas_event("path_selected", "contention", role="forward"), copas_event("path_switched", "rerr")])

    assert analyse.main([str(tmp_path)]) == 0
    rows = markdown_rows(capsys.readouterr().out)
    assert [(row["conns"], row["protocol"], row["topologies"]) for row in rows] == [
        ("1", "aodv", "2"), ("1", "copas", "3"), ("5", "copas", "1")]
    aodv, copas, alone = rows
    assert aodv["aggregate throughput kbit/s"] == "150 (100-200)"
    assert aodv["/AODV"] == ""
    # Mean of 0.5 and 1.5 (with seed 3 paired, there would be no partner to divide by).
    assert copas["/AODV"] == "1 (0.5-1.5)"
    assert alone["/AODV"] == "-"  # no AODV run at 5 connections
    # Per node per second over 50 s: backoffs 1000 / 2 / 50 = 10 and 2000 / 2 / 50 = 20, deferrals 30 and 30;
    # routing bytes per byte acked 5000 / 50000 = 0.1 and 10000 / 50000 = 0.2.
    assert aodv["backoffs/s/node"] == "15 (10-20)"
    assert aodv["deferrals/s/node"] == "30 (30-30)"
    assert aodv["routing bytes / data byte"] == "0.15 (0.1-0.2)"
    # Only c1 has COPAS events: one reroute, one RERR switch; AODV reports none.
    assert copas["reroutes, RERR switches per run"] == "1, 1"
    assert aodv["reroutes, RERR switches per run"] == ""
    # The worst p99 lateness of the group: 1.5 ms.
    assert aodv["lateness p99 ms (worst)"] == "1.5"


def test_main_without_runs_names_the_file(tmp_path, capsys):
    (tmp_path / "runs.jsonl").write_text("")
    assert analyse.main([str(tmp_path)]) == 1
    assert f"{tmp_path / 'runs.jsonl'}: no runs recorded" in capsys.readouterr().err


def tcpinfo(seconds: float, sport: int, acked: int) -> dict[str, Any]:
    return {"time_ns": 1_000 * 10**9 + round(seconds * 1e9), "sport": sport, "bytes_acked": acked}


def test_goodput_series_bins_the_data_connections_bytes_per_second(tmp_path):
    write_jsonl(tmp_path / "runs" / "r" / "c1.tcpinfo.jsonl", [
        # iperf3's control connection: sampled first, 37 bytes in all.
        tcpinfo(0.0, 40000, 0), tcpinfo(3.0, 40000, 37),
        # The data connection; each interval's bytes go to the second it ends in, from its first sample:
        # ends 0.5 s: 1000 B -> second 0; 1.0 and 1.5 s: 2000 + 0 B -> second 1; 2.5 s: 5000 B -> second 2;
        # nothing ends in second 3; 4.2 s: 1000 B -> second 4.
        tcpinfo(0.2, 40002, 0), tcpinfo(0.7, 40002, 1000), tcpinfo(1.2, 40002, 3000), tcpinfo(1.7, 40002, 3000),
        tcpinfo(2.7, 40002, 8000), tcpinfo(4.4, 40002, 9000),
    ])
    seconds, kbps = analyse.goodput_series(tmp_path, {"run_id": "r"}, "c1")
    assert seconds == [0.0, 1.0, 2.0, 3.0, 4.0]
    # bytes · 8 / 1000 per second.
    assert kbps == pytest.approx([8.0, 16.0, 40.0, 0.0, 8.0])
    # No samples (the flow never ran), or one (it never opened): nothing to plot.
    assert analyse.goodput_series(tmp_path, {"run_id": "r"}, "c2") == ([], [])
    write_jsonl(tmp_path / "runs" / "r" / "c3.tcpinfo.jsonl", [tcpinfo(0.2, 40004, 0)])
    assert analyse.goodput_series(tmp_path, {"run_id": "r"}, "c3") == ([], [])


# --- experiments/copas/counters.py ----------------------------------------------------------------

T0_S = 1_700_000_000


def snapshot(t_s: float, defers: dict[str, int]) -> dict[str, Any]:
    zero = {"backoffs": 0, "tx_data_frames": 0, "tx_broadcast_frames": 0, "retry_drops": 0}
    return {"t_s": t_s, "nodes": {node: {**zero, "defers": count} for node, count in defers.items()}}


def path_selected(t_s: float, role: str, path: list[str]) -> dict[str, Any]:
    return {"event": "path_selected", "cause": "contention", "wall": T0_S + t_s, "role": role,
            "src": NODE_IP["n0"], "dst": NODE_IP["n4"], "path": [NODE_IP[node] for node in path]}


def test_smoothing_is_copasd_mu_per_second():
    # Backoffs 0, 8, 8, 48 at 0, 1, 2, 4 s: N = 8, 0, 20 per s (the last interval lasts 2 s);
    # mu = 0.25 mu + 0.75 N: 6, 1.5, 0.375 + 15 = 15.375.
    snapshots = [{"t_s": t, "nodes": {"n1": {"backoffs": b}}} for t, b in ((0.0, 0), (1.0, 8), (2.0, 8), (4.0, 48))]
    assert counters.smoothed(snapshots, counters.COUNTERS["backoffs"])["n1"] == pytest.approx([6.0, 1.5, 15.375])


def test_busy_backoffs_leave_out_the_backoff_after_each_own_frame():
    # 50 backoffs after 20 data frames, 5 broadcasts and 3 dropped frames: 50 − 28 = 22 the medium caused.
    assert counters.COUNTERS["busy_backoffs"](
        {"backoffs": 50, "tx_data_frames": 20, "tx_broadcast_frames": 5, "retry_drops": 3}) == 22


def copas_counters_run(results: Path, run_id: str) -> None:
    run = results / "runs" / run_id
    (run / "routing").mkdir(parents=True)
    (run / "clock.json").write_text(json.dumps({"run_t0_wall_ns": T0_S * 10**9}))
    # Deferrals per second, constant: n0 (source) 1600, n1 32, n2 64, n3 16, n4 (destination) 3200, n5 160.
    # mu after the 1st second is 0.75 N, after the 2nd 0.9375 N: n1 24, 30; n2 48, 60; n3 12, 15; n5 120, 150.
    rates = {"n0": 1600, "n1": 32, "n2": 64, "n3": 16, "n4": 3200, "n5": 160}
    write_jsonl(run / "stats.jsonl", [snapshot(t, {node: rate * t for node, rate in rates.items()})
                                      for t in (0.0, 1.0, 2.0)])
    # Both directions through n1, n2 from 0.5 s; the forward one moves to n3 at 1.5 s (counts from 2 s on).
    write_jsonl(run / "routing" / "n4.copas-events.jsonl", [
        path_selected(0.5, "both", ["n0", "n1", "n2", "n4"]),
        {"event": "contention_high", "wall": T0_S + 1.2, "role": "forward"},
        path_selected(1.5, "forward", ["n0", "n3", "n4"]),
    ])


def copas_counters_records(seeds: list[int]) -> list[dict[str, Any]]:
    config = {"nodes": [{"name": name, "ipv4": ip} for name, ip in NODE_IP.items()]}
    return [{"run_id": f"copas{seed}", "seed": seed, "params": {"connections": 1, "protocol": "copas"},
             "config": config} for seed in seeds]


def test_counters_split_the_relays_of_the_selected_paths_from_the_other_nodes(tmp_path, capsys):
    config = {"nodes": [{"name": name, "ipv4": ip} for name, ip in NODE_IP.items()]}
    # AODV chooses no path: left out (it has no run files here, and would fail if read).
    aodv = {"run_id": "aodv", "seed": 1, "params": {"connections": 1, "protocol": "aodv"}, "config": config}
    write_jsonl(tmp_path / "runs.jsonl", copas_counters_records([1]) + [aodv])
    copas_counters_run(tmp_path, "copas1")

    assert counters.main([str(tmp_path)]) == 0
    rows = [row for row in markdown_rows(capsys.readouterr().out) if row["counter"] == "defers"]
    assert len(rows) == 1
    row = rows[0]
    assert row["seed"] == "1"
    # At 1 s: relays n1 24, n2 48; others n3 12, n5 120; path max 48 forward, 48 reverse.
    # At 2 s: relays n3 15, n1 30, n2 60; others n5 150; path max 15 forward, 60 reverse.
    # Relays sorted 15 24 30 48 60 (p10/p50/p90: indexes 0, 2, 4); others 12 120 150 (0, 1, 2);
    # path max 15 48 48 60 (0, 2, 3). The endpoints n0, n4 count nowhere.
    assert row["relays' mu p10/p50/p90"] == "15/30/60"
    assert row["other nodes' mu p10/p50/p90"] == "12/120/150"
    assert row["path max mu p10/p50/p90"] == "15/48/60"
    # Path maxima above 6, 25, 50, 100, 200, 400: 4, 3, 1, 0, 0, 0 of 4.
    assert [row[f"> {t}"] for t in counters.THRESHOLDS] == ["100%", "75%", "25%", "0%", "0%", "0%"]


def test_counters_pool_the_seconds_of_a_cases_seeds(tmp_path, capsys):
    write_jsonl(tmp_path / "runs.jsonl", copas_counters_records([3, 2]))
    for seed in (2, 3):
        copas_counters_run(tmp_path, f"copas{seed}")

    assert counters.main([str(tmp_path)]) == 0
    rows = [row for row in markdown_rows(capsys.readouterr().out) if row["counter"] == "defers"]
    assert [row["seed"] for row in rows] == ["2", "3", "all"]
    # Two runs alike: the pooled path maxima 15 15 48 48 48 48 60 60 (indexes 0, 4, 7).
    assert rows[2]["path max mu p10/p50/p90"] == "15/48/60"
    assert rows[2]["relays' mu p10/p50/p90"] == "15/30/60"


def test_counters_without_copas_runs_names_the_file(tmp_path, capsys):
    write_jsonl(tmp_path / "runs.jsonl", [{"run_id": "a", "params": {"connections": 1, "protocol": "aodv"}}])
    assert counters.main([str(tmp_path)]) == 1
    assert f"{tmp_path / 'runs.jsonl'}: no COPAS runs recorded" in capsys.readouterr().err


# --- experiments/re-tfrc/tables.py ----------------------------------------------------------------

def tfrc_flow(hops: int = 4, goodput: float = 100e3, rtt: float | None = 100.0, p: float | None = 0.01,
              feedback: int = 10, **fields: Any) -> dict[str, Any]:
    return {"kind": "tfrc", "hops": hops, "goodput_bps": goodput, "feedback": feedback,
            "rtt_ms": None if rtt is None else {"mean": rtt}, "loss_event_rate": p, **fields}


def tfrc_record(mode: str, seed: int, flows: list[dict[str, Any]], *, n: int = 5, mac_drops: float = 0.0,
                rts_hist: list[int] | None = None, p99_ns: int = 100_000, **options: Any) -> dict[str, Any]:
    return {"run_id": f"{mode}-{n}-{seed}", "seed": seed,
            "params": {"topology.generate.n": n, "traffic.0.mode": mode},
            "config": {"traffic": [{"options": {"mode": mode, **options}}]},
            "metrics": {"flows": flows, "medium": {"total": {"mac_drop_fraction": mac_drops,
                                                             "rts_attempts_hist": rts_hist or [0] * 16}}},
            "lateness": {"p99_ns": p99_ns}}


def test_several_flows_count_as_one_weighted_by_their_feedback():
    record = tfrc_record("tfrc", 1, [
        tfrc_flow(goodput=100e3, rtt=100.0, p=0.01, feedback=1),
        tfrc_flow(goodput=50e3, rtt=400.0, p=0.03, feedback=3),
        tfrc_flow(goodput=10e3, rtt=None, p=None, feedback=0),  # starved: no feedback in the window
        {"kind": "tcp", "goodput_bps": 1e6},  # not a TFRC flow
    ])
    assert tables.goodput(record) == pytest.approx(160e3)
    # (100 · 1 + 400 · 3) / 4 = 325 ms; (0.01 · 1 + 0.03 · 3) / 4 = 0.025.
    assert tables.rtt(record) == pytest.approx(325.0)
    assert tables.loss_event_rate(record) == pytest.approx(0.025)
    silent = tfrc_record("tfrc", 1, [tfrc_flow(rtt=None, p=None, feedback=0)])
    assert (tables.rtt(silent), tables.loss_event_rate(silent)) == (None, None)


def compare_records() -> list[dict[str, Any]]:
    def pair(seed, tfrc, re, n=5, hops=4):
        runs = []
        for mode, (rtt, drops, p, kbps) in (("tfrc", tfrc), ("re-tfrc", re)):
            flow = tfrc_flow(hops=hops, rtt=rtt, p=p, goodput=kbps * 1e3)
            runs.append(tfrc_record(mode, seed, [flow], n=n, mac_drops=drops, p99_ns=seed * 100_000))
        return runs

    return [
        # A 7-hop group first in the file: sorted after the 4-hop one.
        *pair(1, (300, 0.01, 0.01, 100), (200, 0.01, 0.01, 100), n=8, hops=7),
        # (RTT ms, MAC drop fraction, p, kbit/s) TFRC -> RE-TFRC per seed; reductions (TFRC − RE) / TFRC:
        # seed 1: RTT 25 %, drops 50 %, p 50 %, throughput −10 %
        *pair(1, (200, 0.04, 0.02, 300), (150, 0.02, 0.01, 270)),
        # seed 2: RTT 50 %, drops 0 %, p −50 %, throughput +10 %
        *pair(2, (400, 0.02, 0.02, 200), (200, 0.02, 0.03, 220)),
        # seed 3: RTT 10 %, drops 75 %, p 0 %, throughput +5 %
        *pair(3, (100, 0.01, 0.02, 100), (90, 0.0025, 0.02, 105)),
        # A TFRC run without its RE-TFRC partner: in no column.
        tfrc_record("tfrc", 4, [tfrc_flow(rtt=1000.0, goodput=1e6)], mac_drops=0.5, p99_ns=9_000_000),
        # A group with TFRC runs only: no row.
        tfrc_record("tfrc", 1, [tfrc_flow(hops=10)], n=11),
    ]


def test_compare_pairs_runs_by_seed_and_reports_reductions_per_pair(capsys):
    tables.compare(compare_records())
    rows = markdown_rows(capsys.readouterr().out)
    assert [(row["group"], row["hops"], row["pairs"]) for row in rows] == [("n=5", "4", "3"), ("n=8", "7", "1")]
    four_hops, seven_hops = rows
    assert four_hops["RTT ms TFRC → RE"] == "100/200/400 → 90/150/200"
    assert four_hops["MAC drops % TFRC → RE"] == "1.00/2.00/4.00 → 0.25/2.00/2.00"
    assert four_hops["throughput kbit/s TFRC → RE"] == "100/200/300 → 105/220/270"
    # min/median/max of the reductions per pair (the medians' reduction would be (2 − 2) / 2 = 0 % for drops).
    assert four_hops["RTT reduction %"] == "10/25/50"
    assert four_hops["MAC drop reduction %"] == "0/50/75"
    assert four_hops["p reduction %"] == "-50/0/50"
    assert four_hops["throughput gain %"] == "-10/5/10"
    # The worst p99 of the paired runs (seed 3: 0.3 ms), not the unpaired run's 9 ms.
    assert four_hops["lateness p99 ms"] == "0.3"
    # One pair: its values alone; (300 − 200) / 300 = 33 %.
    assert seven_hops["RTT ms TFRC → RE"] == "300 → 200"
    assert seven_hops["RTT reduction %"] == "33"


def test_main_compares_runs_from_several_results_directories(tmp_path, monkeypatch, capsys):
    records = compare_records()
    write_jsonl(tmp_path / "tfrc" / "runs.jsonl", [r for r in records if r["params"]["traffic.0.mode"] == "tfrc"])
    write_jsonl(tmp_path / "re" / "runs.jsonl", [r for r in records if r["params"]["traffic.0.mode"] == "re-tfrc"])
    monkeypatch.setattr(sys, "argv", ["tables.py", "compare", str(tmp_path / "tfrc"), str(tmp_path / "re")])
    tables.main()
    rows = markdown_rows(capsys.readouterr().out)
    assert [(row["group"], row["pairs"], row["RTT reduction %"]) for row in rows] == [
        ("n=5", "3", "10/25/50"), ("n=8", "1", "33")]


def test_a_missing_results_directory_is_named(tmp_path):
    with pytest.raises(SystemExit, match=re.escape(f"{tmp_path / 'runs.jsonl'}: no such file")):
        tables.read_runs(tmp_path)


def hist(*counts: int) -> list[int]:
    """rts_attempts_hist: frames finished after k + 1 RTS attempts at index k."""
    return [*counts] + [0] * (16 - len(counts))


def cdf_shares(row: dict[str, str]) -> list[str]:
    return [row[f"≤{k} retries"] for k in range(tables.RTS_ATTEMPTS)]


def test_rts_cdf_sums_the_histograms_of_each_mode_at_the_hop_count(capsys):
    records = [
        # TFRC at 7 hops, two runs: frames after 1, 2, 3, ... RTS attempts: 8, 2, 1, 0, 0, 0, 0, 1 (12 frames;
        # the one sent 8 times counts in the total and in no share).
        tfrc_record("tfrc", 1, [tfrc_flow(hops=7)], rts_hist=hist(6, 2, 1, 0, 0, 0, 0, 1)),
        tfrc_record("tfrc", 2, [tfrc_flow(hops=7)], rts_hist=hist(2)),
        # RE-TFRC at 7 hops: 9 frames at the first RTS, 1 at the second.
        tfrc_record("re-tfrc", 1, [tfrc_flow(hops=7)], rts_hist=hist(9, 1)),
        # Another hop count: not in the CDF.
        tfrc_record("tfrc", 1, [tfrc_flow(hops=4)], rts_hist=hist(0, 100)),
    ]
    tables.rts_cdf(records, 7)
    rows = {row["mode"]: row for row in markdown_rows(capsys.readouterr().out)}
    # 8/12, 10/12, 11/12 and 11/12 from then on.
    assert rows["tfrc"]["frames"] == "12"
    assert cdf_shares(rows["tfrc"]) == ["0.667", "0.833"] + ["0.917"] * 5
    assert rows["re-tfrc"]["frames"] == "10"
    assert cdf_shares(rows["re-tfrc"]) == ["0.900"] + ["1.000"] * 6
    with pytest.raises(SystemExit, match="no run with 5 hops"):
        tables.rts_cdf(records, 5)


def test_constrained_rate_has_a_row_per_cap_over_the_seeds(capsys):
    def run(seed, cap_kbps, offered_kbps, drops):
        flow = tfrc_flow(hops=7, goodput=0.9 * offered_kbps * 1e3, rtt=100.0 * seed, p=0.01,
                         sending_rate_bps=offered_kbps * 1e3, allowed_rate_bps=2 * offered_kbps * 1e3)
        return tfrc_record("tfrc", seed, [flow], n=8, mac_drops=drops, rate_cap_bps=cap_kbps * 1e3)

    # Caps out of order; two seeds at 100 kbit/s: offered 99 and 101 (median 100), drops 1 % and 3 %.
    tables.constrained_rate([run(1, 200, 190, 0.05), run(1, 100, 99, 0.01), run(2, 100, 101, 0.03)])
    rows = markdown_rows(capsys.readouterr().out)
    assert [(row["cap kbit/s"], row["runs"]) for row in rows] == [("100", "2"), ("200", "1")]
    low, high = rows
    assert low["offered kbit/s"] == "99/100/101"
    assert low["X kbit/s"] == "198/200/202"
    assert low["MAC drops %"] == "1.00/2.00/3.00"
    assert low["RTT ms"] == "100/150/200"
    assert high["throughput kbit/s"] == "171"
    assert high["MAC drops %"] == "5.00"


# --- experiments/validation/ns2/frame_lengths.py ---------------------------------------------------

def medium_sending(tmp_path: Path, lines: list[dict[str, Any]],
                   events: list[str]) -> tuple[Path, threading.Thread]:
    """A control socket that answers a subscription to `events` with `lines`, then closes, as a medium
    going down."""
    path = tmp_path / "control.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve():
        with server, server.accept()[0] as client:
            assert json.loads(client.makefile("rb").readline()) == {"op": "subscribe", "events": events}
            client.sendall("".join(json.dumps(line) + "\n" for line in lines).encode())

    thread = threading.Thread(target=serve)
    thread.start()
    return path, thread


def drop(node: str, length: int, kind: str) -> dict[str, Any]:
    return {"event": "drop", "time_ns": 1, "node": node, "len": length, "outcome": {"kind": kind}}


def test_frame_lengths_counts_drops_by_kind_length_and_node(tmp_path):
    path, thread = medium_sending(tmp_path, [{"ok": True}, drop("n1", 1480, "retry_drop"),
                                             drop("n1", 48, "retry_drop"), drop("n2", 1480, "retry_drop"),
                                             drop("n2", 1480, "queue_drop"), drop("n2", 68, "link_drop"),
                                             drop("n2", 68, "link_drop")], ["drop"])
    counts = frame_lengths.count(path, ["drop"])
    thread.join()
    assert counts["events"] == {"retry_drop": 3, "queue_drop": 1, "link_drop": 2}
    assert counts["by_length"] == {"retry_drop": {"48": 1, "1480": 2}, "queue_drop": {"1480": 1},
                                   "link_drop": {"68": 2}}
    assert counts["by_length_and_node"]["retry_drop"] == {"48": {"n1": 1}, "1480": {"n1": 1, "n2": 1}}
    assert counts["by_length_and_node"]["link_drop"] == {"68": {"n2": 2}}


def test_frame_lengths_counts_frames_sent_and_received_but_not_overheard(tmp_path):
    def rx(node: str, length: int, overheard: bool) -> dict[str, Any]:
        return {"event": "rx", "time_ns": 1, "node": node, "from": "n1", "len": length, "rx_power_dbm": -60.0,
                "sinr_db": 30.0, "overheard": overheard}

    def tx(node: str, length: int, kind: str) -> dict[str, Any]:
        return {"event": "tx", "time_ns": 1, "node": node, "len": length, "outcome": {"kind": kind}}

    events = ["tx", "rx", "drop"]
    path, thread = medium_sending(tmp_path, [{"ok": True}, tx("n1", 68, "acked"), rx("n2", 68, False),
                                             rx("n3", 68, True), tx("n2", 52, "broadcast"),
                                             drop("n2", 68, "retry_drop")], events)
    counts = frame_lengths.count(path, events)
    thread.join()
    assert counts["events"] == {"acked": 1, "rx": 1, "broadcast": 1, "retry_drop": 1}
    assert counts["by_length_and_node"]["rx"] == {"68": {"n2": 1}}
    assert counts["by_length_and_node"]["acked"] == {"68": {"n1": 1}}


def test_frame_lengths_refuses_counts_with_events_lost(tmp_path):
    path, thread = medium_sending(tmp_path, [{"ok": True}, drop("n1", 1480, "retry_drop"),
                                             {"event": "dropped", "count": 7}], ["drop"])
    with pytest.raises(SystemExit, match="lost 7 events"):
        frame_lengths.count(path, ["drop"])
    thread.join()


# --- experiments/validation/ns2/arp_watch.py -----------------------------------------------------

def test_arp_watch_reads_neighbour_changes_as_ip_prints_them():
    lines = ["[2026-11-30T11:10:39.817171] 10.0.0.5 dev wlan0 lladdr 02:00:00:00:00:05 STALE \n",
             "[2026-11-30T11:10:45.060593] 10.0.0.5 dev wlan0 lladdr 02:00:00:00:00:05 PROBE \n",
             "[2026-11-30T11:10:46.500000] Deleted 10.0.0.7 dev wlan0 lladdr 02:00:00:00:00:07 FAILED\n",
             "[2026-11-30T11:10:47.000000] 10.0.0.8 dev wlan0  FAILED\n",
             "Timestamp: something else\n", "[2026-11-30T11:10:48.000000]\n"]
    changes = list(arp_watch.neighbour_changes("n3", lines))
    assert [(c["node"], c["address"], c["state"]) for c in changes] == [
        ("n3", "10.0.0.5", "STALE"), ("n3", "10.0.0.5", "PROBE"), ("n3", "10.0.0.7", "DELETED"),
        ("n3", "10.0.0.8", "FAILED")]
    # 5.243422 s between the first two stamps, whatever the host's zone.
    assert math.isclose(changes[1]["wall_s"] - changes[0]["wall_s"], 5.243422, abs_tol=1e-6)


def test_arp_watch_keeps_arp_frames_and_drops_only(tmp_path):
    def tx(length: int, kind: str) -> dict[str, Any]:
        return {"event": "tx", "time_ns": 5, "node": "n1", "len": length, "outcome": {"kind": kind}}

    path, thread = medium_sending(tmp_path, [{"ok": True}, tx(28, "acked"), tx(1500, "acked"), tx(28, "broadcast"),
                                             drop("n2", 1500, "retry_drop"), drop("n2", 28, "retry_drop")],
                                  ["tx", "drop"])
    kept = [event for event in arp_watch.subscription(path, ["tx", "drop"]) if arp_watch.kept(event)]
    thread.join()
    assert [(e["event"], e["len"], e["outcome"]["kind"]) for e in kept] == [
        ("tx", 28, "acked"), ("tx", 28, "broadcast"), ("drop", 1500, "retry_drop"), ("drop", 28, "retry_drop")]


def test_arp_watch_refuses_a_log_with_events_lost(tmp_path):
    path, thread = medium_sending(tmp_path, [{"ok": True}, {"event": "dropped", "count": 3}], ["tx", "drop"])
    with pytest.raises(SystemExit, match="lost 3 events"):
        list(arp_watch.subscription(path, ["tx", "drop"]))
    thread.join()


# --- experiments/validation/ns2/flow_drops.py ----------------------------------------------------

NS2_TCP_LINES = [
    # Segment 5 of the flow 90:0 -> 84:6 sent, lost at the retry limit at n87, sent again and received.
    "s 12.5 _90_ AGT  --- 7 tcp 1500 [0 0 0 0] ------- [90:0 84:6 32 0] [5 0] 0 0",
    "D 12.6 _87_ MAC  RET 7 tcp 1500 [13a 57 5e 800] ------- [90:0 84:6 29 86] [5 0] 0 0",
    "D 12.6 _86_ MAC  COL 7 tcp 1500 [13a 56 57 800] ------- [90:0 84:6 29 86] [5 0] 0 0",
    "s 13.5 _90_ AGT  --- 9 tcp 1500 [0 0 0 0] ------- [90:0 84:6 32 0] [5 0] 0 0",
    "r 13.6 _84_ AGT  --- 9 tcp 1520 [13a 54 55 800] ------- [90:0 84:6 26 84] [5 0] 6 0",
    # Its ACK lost at a link break at n85; another flow's drop; a drop after the window.
    "D 13.7 _85_ RTR  CBK 10 ack 60 [13a 55 54 800] ------- [84:6 90:0 31 86] [5 0] 0 0",
    "D 13.7 _85_ RTR  CBK 11 tcp 1500 [13a 55 54 800] ------- [162:0 84:7 31 86] [8 0] 0 0",
    "D 151.0 _88_ RTR  NRTE 12 tcp 1500 [0 0 0 0] ------- [90:0 84:6 30 0] [6 0] 0 0",
]


def test_flow_drops_accounts_for_one_flows_segments_and_acks_in_the_window():
    found = flow_drops.account(NS2_TCP_LINES, (90, 0), (84, 6), (12.0, 150.0))
    assert found.sent == {5: 2} and found.received == {5}
    assert found.drops["data"] == {(87, "mac_ret"): 1}  # the collision copy at n86 is no loss
    assert found.drops["ack"] == {(85, "rtr_cbk"): 1}


# --- experiments/validation/ns2/packet_fates.py --------------------------------------------------

NS2_CBR_LINES = [
    # Packet 1 of 84:8 -> 0:1: lost at the retry limit at relay n71, which AODV logs again as flushed.
    "s 12.0 _84_ AGT  --- 1 cbr 48 [0 0 0 0] ------- [84:8 0:1 32 0] [1] 0 0",
    "s 12.0 _84_ RTR  --- 1 cbr 68 [0 0 0 0] ------- [84:8 0:1 30 71] [1] 0 0",
    "D 12.1 _71_ MAC  RET 1 cbr 68 [13a 3a 47 800] ------- [84:8 0:1 29 58] [1] 1 0",
    "D 12.1 _71_ RTR  CBK 1 cbr 68 [13a 3a 47 800] ------- [84:8 0:1 29 58] [1] 1 0",
    # Packet 2: flushed at the source with another's failure; packet 3: a full queue at n80.
    "s 12.7 _84_ AGT  --- 2 cbr 48 [0 0 0 0] ------- [84:8 0:1 32 0] [2] 0 0",
    "D 12.8 _84_ RTR  CBK 2 cbr 68 [0 0 0 0] ------- [84:8 0:1 30 71] [2] 0 0",
    "s 13.4 _84_ AGT  --- 3 cbr 48 [0 0 0 0] ------- [84:8 0:1 32 0] [3] 0 0",
    "D 13.5 _80_ IFQ  --- 3 cbr 68 [0 0 0 0] ------- [84:8 0:1 28 67] [3] 2 0",
    # Packet 4 held while AODV searched, released later and dropped without a route at n85, a
    # collision copy on its way; packet 5 delivered; packet 6 sent after the window, lost.
    "s 14.0 _84_ AGT  --- 4 cbr 48 [0 0 0 0] ------- [84:9 90:1 32 0] [4] 0 0",
    "s 14.3 _84_ RTR  --- 4 cbr 68 [0 0 0 0] ------- [84:9 90:1 30 85] [4] 0 0",
    "D 14.3 _86_ MAC  COL 4 cbr 68 [13a 55 54 800] ------- [84:9 90:1 30 85] [4] 0 0",
    "D 14.4 _85_ RTR  NRTE 4 cbr 68 [13a 55 54 800] ------- [84:9 90:1 29 0] [4] 1 0",
    "s 14.7 _84_ AGT  --- 5 cbr 48 [0 0 0 0] ------- [84:9 90:1 32 0] [5] 0 0",
    "r 14.8 _90_ AGT  --- 5 cbr 68 [13a 5a 59 800] ------- [84:9 90:1 25 90] [5] 6 0",
    "s 151.0 _84_ AGT  --- 6 cbr 48 [0 0 0 0] ------- [84:9 90:1 32 0] [6] 0 0",
    # Another node's packet.
    "D 14.5 _85_ RTR  NRTE 7 cbr 1488 [13a 55 54 800] ------- [80:0 88:0 29 0] [9] 1 0",
]


def test_packet_fates_follows_each_lost_ns2_packet_to_its_end():
    fates = packet_fates.ns2_fates(NS2_CBR_LINES, 84, (12.0, 150.0))
    assert (fates.sent, fates.lost) == (5, 4)
    assert (fates.retry_src, fates.retry_relay, fates.flushed_src, fates.flushed_relay, fates.queue) == (0, 1, 1, 0, 1)
    assert fates.other == 1 and fates.other_reasons == {"rtr_nrte": 1} and fates.no_route_held == 1
    assert fates.line().endswith("other 1 (rtr_nrte 1, 1 of them held by the source)")


def test_packet_fates_takes_a_lab_runs_drops_of_the_flows_length_by_node():
    record = {"run_id": "r1", "metrics": {"flows": [
        {"name": "a0", "packets_sent": 100, "packets_received": 80},
        {"name": "a6", "packets_sent": 100, "packets_received": 70},
        {"name": "c0", "packets_sent": 100, "packets_received": 10}]}}
    counts = {"by_length_and_node": {"retry_drop": {"68": {"n84": 4, "n71": 6}, "1488": {"n84": 50}},
                                     "link_drop": {"68": {"n84": 9, "n85": 1}}}}
    fates = packet_fates.lab_fates(record, counts, "n84", ["a0", "a6"], 68)
    assert (fates.sent, fates.lost) == (200, 50)
    assert (fates.retry_src, fates.retry_relay, fates.flushed_src, fates.flushed_relay, fates.queue) == (4, 6, 9, 1, 0)
    assert fates.other == 30 and fates.other_reasons is None
    with pytest.raises(SystemExit, match="no flow a12"):
        packet_fates.lab_fates(record, counts, "n84", ["a0", "a12"], 68)


# --- experiments/validation/ns2/rreq_origins.py --------------------------------------------------

NS2_AODV_LINES = [
    # n80 floods network-wide for n88; n81 relays it; n88 answers.
    "s 12.0 _80_ RTR  --- 0 AODV 48 [0 0 0 0] ------- [80:255 -1:255 30 0] [0x2 1 1 [88 0] [80 4]] (REQUEST)",
    "s 12.1 _81_ RTR  --- 0 AODV 48 [0 ffffffff 50 800] ------- [81:255 -1:255 29 0] [0x2 2 1 [88 0] [80 4]] (REQUEST)",
    "s 12.2 _88_ RTR  --- 0 AODV 44 [0 0 0 0] ------- [88:255 80:255 30 87] [0x4 1 [88 6] 10.000000] (REPLY)",
    # n50 repairs its route to n88 in a ring of TTL 9; n51, which has a route, answers.
    "s 13.0 _50_ RTR  --- 0 AODV 48 [0 0 0 0] ------- [50:255 -1:255 9 0] [0x2 1 7 [88 6] [50 9]] (REQUEST)",
    "s 13.1 _51_ RTR  --- 0 AODV 44 [0 0 0 0] ------- [51:255 50:255 30 50] [0x4 4 [88 6] 9.000000] (REPLY)",
    # Not the routing agent's sending: left out.
    "r 13.2 _52_ RTR  --- 0 AODV 48 [0 ffffffff 50 800] ------- [50:255 -1:255 8 0] [0x2 2 7 [88 6] [50 9]] (REQUEST)",
]


def test_rreq_origins_splits_ns2_floods_by_originator_and_counts_who_answered(tmp_path):
    trace = tmp_path / "trace.tr"
    trace.write_text("\n".join(NS2_AODV_LINES) + "\n")
    floods = rreq_origins.ns2_floods(trace, {80, 32})
    assert floods["source, network-wide"] == {"floods": 1, "transmissions": 2, "per_flood": 2.0,
                                              "replies": {"destination": 1, "node with a route": 0}}
    assert floods["relay, ring"] == {"floods": 1, "transmissions": 1, "per_flood": 1.0,
                                     "replies": {"destination": 0, "node with a route": 1}}


def test_rreq_origins_counts_a_lab_runs_originated_rreqs_by_node(tmp_path):
    routing = tmp_path / "runs" / "r1" / "routing"
    routing.mkdir(parents=True)
    for node, sent in (("n0", 5), ("n3", 2)):
        status = {"address": NODE_IP[node], "control_sent": {"rreq": {"packets": sent, "bytes": 24 * sent}}}
        (routing / f"{node}.aodv.json").write_text(json.dumps(status))
    write_jsonl(routing / "n0.aodv-events.jsonl", [{"event": "rreq_sent", "node": NODE_IP["n0"]}] * 2)
    write_jsonl(routing / "n3.aodv-events.jsonl", [{"event": "rreq_sent", "node": NODE_IP["n3"]},
                                                    {"event": "link_broken", "node": NODE_IP["n3"]}])
    record = {"run_id": "r1", "seed": 4, "software": {"git": "abc"}}
    assert rreq_origins.lab_floods(tmp_path, record, {"n0"}) == {
        "seed": 4, "code": "abc", "originated": {"source": 2, "relay": 1}, "transmissions": 7}



def test_rreq_origins_numbers_ns2_rreqs_within_their_search(tmp_path):
    def request(t, node, ttl, bcast):
        return (f"s {t} _{node}_ RTR  --- 0 AODV 48 [0 0 0 0] ------- [{node}:255 -1:255 {ttl} 0] "
                f"[0x2 1 {bcast} [8 0] [{node} 4]] (REQUEST)")
    trace = tmp_path / "trace.tr"
    trace.write_text("\n".join([
        request(4.0, 0, 30, 1),  # before the window: attempt 1
        request(5.0, 0, 30, 2),  # its second attempt
        # n1 passes the RREQ on (not an origination); n8's reply passes n1, then reaches n0
        "s 5.1 _1_ RTR  --- 0 AODV 48 [0 ffffffff 0 800] ------- [1:255 -1:255 29 0] [0x2 2 2 [8 0] [0 4]] (REQUEST)",
        "r 5.3 _1_ RTR  --- 0 AODV 44 [13a 1 8 800] ------- [8:255 0:255 30 1] [0x4 7 [8 6] 10.000000] (REPLY)",
        request(6.0, 0, 30, 3),  # the reply has not reached n0 yet: a third attempt
        "r 6.2 _0_ RTR  --- 0 AODV 44 [13a 0 1 800] ------- [8:255 0:255 29 0] [0x4 8 [8 6] 10.000000] (REPLY)",
        request(7.0, 0, 9, 4),   # a new search, in a ring
        request(8.0, 0, 11, 5),  # the ring grows
        request(9.0, 0, 9, 6),   # the TTL fell: that search was given up, this one begins again
        request(10.0, 3, 30, 1),  # another originator's first
    ]) + "\n")
    assert rreq_origins.ns2_attempts(trace, (5.0, 10.0)) == {1: 3, 2: 2, 3: 1}


def test_rreq_origins_takes_a_lab_runs_attempts_in_the_window(tmp_path):
    run = tmp_path / "runs" / "r1"
    (run / "routing").mkdir(parents=True)
    s = 10 ** 9
    (run / "clock.json").write_text(json.dumps({"run_t0_mono_ns": 100 * s}))
    write_jsonl(run / "routing" / "n0.aodv-events.jsonl", [
        {"event": "rreq_sent", "attempt": 1, "mono_ns": 104 * s},
        {"event": "rreq_sent", "attempt": 2, "mono_ns": 106 * s},
        {"event": "discovery_succeeded", "mono_ns": 106 * s},
        {"event": "rreq_sent", "attempt": 1, "mono_ns": 107 * s}])
    write_jsonl(run / "routing" / "n3.aodv-events.jsonl", [{"event": "rreq_sent", "attempt": 1, "mono_ns": 109 * s}])
    assert rreq_origins.lab_attempts(tmp_path, {"run_id": "r1"}, (5.0, 10.0)) == {1: 2, 2: 1}

# --- experiments/validation/ns2/link_breaks.py ------------------------------------------------------

def test_link_breaks_tells_failed_first_resolutions_from_entries_resolved_before(tmp_path, monkeypatch, capsys):
    routing = tmp_path / "runs" / "r1" / "routing"
    s = 10 ** 9
    n1, n2, n3 = NODE_IP["n1"], NODE_IP["n2"], NODE_IP["n3"]
    write_jsonl(routing / "n0.aodv-events.jsonl", [
        # n1 a next hop from 10 s, its entry failing at 40 s: resolved before (30 s >= 15 s).
        {"event": "route_added", "next_hop": n1, "mono_ns": 10 * s},
        {"event": "route_updated", "next_hop": n1, "mono_ns": 20 * s},
        {"event": "link_broken", "cause": "address resolution", "neighbor": n1, "mono_ns": 40 * s},
        # n1 again from 41 s, failing at 43 s: a first resolution (the clock restarts at the break).
        {"event": "route_added", "next_hop": n1, "mono_ns": 41 * s},
        {"event": "link_broken", "cause": "address resolution", "neighbor": n1, "mono_ns": 43 * s},
        # n2 a next hop from 5 s, its frames failing at 60 s: not a resolution.
        {"event": "route_added", "next_hop": n2, "mono_ns": 5 * s},
        {"event": "link_broken", "cause": "link layer", "neighbor": n2, "mono_ns": 60 * s},
    ])
    write_jsonl(routing / "n4.aodv-events.jsonl", [
        # n3 never a next hop of n4's: a failed resolution without a route counts as a first one.
        {"event": "link_broken", "cause": "address resolution", "neighbor": n3, "mono_ns": 90 * s},
    ])
    (routing / "n4.copas-events.jsonl").write_text(json.dumps(
        {"event": "link_broken", "cause": "link layer", "neighbor": n1, "mono_ns": 0}) + "\n")
    causes, resolved_before = link_breaks.run_breaks(tmp_path / "runs" / "r1")
    assert causes == {"address resolution": 3, "link layer": 1}
    assert resolved_before == 1
    record = {"run_id": "r1", "driver": "lab", "params": {"case": "fifo"}, "seed": 2,
              "software": {"git": "abc"}, "behind_real_time": False}
    write_jsonl(tmp_path / "runs.jsonl", [record, {**record, "run_id": "ns", "driver": "ns2"}])
    monkeypatch.setattr(sys, "argv", ["link_breaks.py", str(tmp_path)])
    link_breaks.main()  # the ns-2 run is left out
    assert capsys.readouterr().out == (
        "case=fifo seed 2 abc in time: link breaks address resolution 3, link layer 1; "
        "failed resolutions on a link in use 15 s or more 1\n")
    monkeypatch.setattr(sys, "argv", ["link_breaks.py", str(tmp_path / "runs")])
    with pytest.raises(SystemExit):  # a directory without recorded lab runs is an error, not silence
        link_breaks.main()
    assert "no lab runs recorded" in capsys.readouterr().err
