"""The backpressure study (issue 6): the queueing plug-in that runs bpd in
every node of a lab (topology `queueing:`), its counters in run records, and
the scaled grid (experiments/backpressure/grid5.yaml): backpressure with
threshold 1 holds two UDP floods that cross at the TCP server at their
sources, where FIFO queues let them fill every radio on the way (Gupta et
al. §4.3)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, namespaces
from meshemu import choices, queueing
from meshemu.errors import ConfigError, LabError
from meshemu.experiment.results import read_records
from meshemu.lab import Lab
from meshemu.source import parse_yaml
from meshemu.topology import resolve_topology

CHAIN = "name: {name}\ngenerate: {{kind: chain, n: {n}, spacing: 200m}}\n"


def resolve(text: str):
    return resolve_topology(parse_yaml(text, "topo.yaml"))


def problems_of(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        resolve(text)
    return str(caught.value)


@pytest.mark.parametrize("queueing_text, expected", [
    ("{mode: fq, threshold: 2}", "queueing: threshold is for mode backpressure, not fq"),
    ("{mode: backpressure, flow_limit: 10}", "queueing: flow_limit is for mode fq, not backpressure"),
    ("{mode: fifo, classify: source}", "queueing: classify needs mode fq or backpressure"),
    ("{mode: backpressure, classify: next-hop}", "classify: next-hop cannot carry backpressure"),
    ("{mode: backpressure, knowledge: beacon, beacon_period: 0s}", "beacon_period must not be 0s"),
    ("{mode: backpressure, threshold: 0}", "queueing.threshold"),
    ("{mode: backpressure, thresold: 2}", "queueing.thresold: unknown key 'thresold' (did you mean 'threshold'?)"),
    ("{mode: fq, classify: sideways}", "queueing.classify"),
    ("{mode: fq, max_hold: 2 lightyears}", "queueing.max_hold"),
    ("fair", "queueing: input should be 'fifo', 'fq' or 'backpressure'"),
])
def test_bad_queueing_options_are_refused_naming_the_key(queueing_text, expected):
    text = CHAIN.format(name="q", n=3) + f"queueing: {queueing_text}\n"
    message = problems_of(text)
    assert expected in message and "topo.yaml:3:" in message, message


def test_overhearing_makes_nodes_promiscuous_and_refuses_deaf_ones():
    topology = resolve(CHAIN.format(name="q", n=3) + "queueing: {mode: backpressure, threshold: 1}\n")
    assert [node["promiscuous"] for node in topology.medium["nodes"]] == [True] * 3
    beacon = resolve(CHAIN.format(name="q", n=3) + "queueing: {mode: backpressure, knowledge: beacon}\n")
    assert [node["promiscuous"] for node in beacon.medium["nodes"]] == [False] * 3
    message = problems_of(CHAIN.format(name="q", n=3) + "defaults: {promiscuous: false}\n"
                          "queueing: {mode: backpressure}\n")
    assert "defaults.promiscuous: queueing knowledge overhear needs promiscuous nodes" in message, message
    assert message.count("needs promiscuous") == 1, message
    message = problems_of(CHAIN.format(name="q", n=3) + "nodes: {n1: {promiscuous: false}}\n"
                          "queueing: {mode: backpressure}\n")
    assert "nodes.n1.promiscuous: queueing knowledge overhear" in message, message


def test_queueing_choices_map_to_bpd_arguments(tmp_path):
    assert not resolve(CHAIN.format(name="q", n=2)).queueing.runs_daemon  # fifo by default: no daemon
    choice = resolve(CHAIN.format(name="q", n=2) + "queueing: {mode: backpressure, classify: destination, "
                     "threshold: 3, knowledge: oracle, max_hold: 1500ms, radio_depth: 1}\n").queueing
    argv = choice.argv("bpd", tmp_path / "c.json", tmp_path / "oracle")
    pairs = dict(zip(argv[1::2], argv[2::2]))
    assert pairs == {"--mode": "backpressure", "--queue-num": "0", "--flow-idle": choices.BPD_FLOW_IDLE,
                     "--counters": str(tmp_path / "c.json"), "--classify": "destination", "--threshold": "3",
                     "--knowledge": "oracle", "--max-hold": "1500000000ns", "--radio-depth": "1",
                     "--oracle": str(tmp_path / "oracle")}
    fq = resolve(CHAIN.format(name="q", n=2) + "queueing: fq\n").queueing
    assert fq.argv("bpd", tmp_path / "c.json", tmp_path / "o")[1:3] == ["--mode", "fq"] and not fq.overhears
    assert "--oracle" not in fq.argv("bpd", tmp_path / "c.json", tmp_path / "o")


def bpd_rules(lab: Lab, node: str) -> list[str]:
    listing = lab[node].run(["iptables", "-t", "mangle", "-S", "POSTROUTING"], check=True).stdout
    return [line for line in listing.splitlines() if "NFQUEUE" in line]


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@pytest.mark.root
def test_bpd_runs_in_every_node_and_stops_at_down(write):
    lab = Lab.from_file(write("q.yaml", CHAIN.format(name="tbpstudy", n=3)
                              + "queueing: {mode: backpressure, threshold: 2}\n"))
    lab.up()
    try:
        daemons = lab.processes("bpd")
        assert sorted(p.node for p in daemons) == ["n0", "n1", "n2"]
        assert all(bpd_rules(lab, node.name) for node in lab)
        assert Lab.attach("tbpstudy").queueing == lab.queueing
        ping = lab["n0"].run(["ping", "-n", "-c", "4", "-i", "0.2", "-W", "2", lab["n2"].ip], timeout=30)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        counters = queueing.stop(lab)
        assert sorted(counters) == ["n0", "n1", "n2"] and not any(map(alive, (p.pid for p in daemons)))
        assert bpd_rules(lab, "n1") == []  # bpd deletes its rule at exit
        for node_counters in counters.values():
            totals = node_counters["totals"]
            assert node_counters["running"] is False and node_counters["threshold"] == 2
            assert totals["enqueued"] == totals["released"] + totals["dropped_limit"] + totals["dropped_full"] \
                + totals["dropped_age"] + totals["shutdown_accepted"] + totals["shutdown_dropped"], totals
        summary = queueing.summary(lab.queueing, counters)
        # The echo requests at n0 and n1 (flow of n0), the replies at n2 and n1 (flow of n2).
        assert summary["flows"][lab["n0"].ip]["released"] >= 8 and summary["flows"][lab["n2"].ip]["released"] >= 8
        assert queueing.source_counters(lab.queueing, counters, "n0", lab["n0"].ip, lab["n2"].ip)["released"] >= 4
        # Started again, then left to down: it stops them by PID.
        queueing.start(lab)
        restarted = [p for p in lab.processes("bpd") if p.poll() is None]
        assert len(restarted) == 3
    finally:
        lab.down()
    time.sleep(0.2)
    assert not any(alive(p.pid) for p in restarted)
    assert not {ns for ns in namespaces() if ns.startswith("tbpstudy")}


@pytest.mark.root
def test_a_daemon_that_refuses_to_start_fails_the_lab_and_leaves_nothing(write, monkeypatch):
    lab = Lab.from_file(write("q.yaml", CHAIN.format(name="tbpbad", n=2) + "queueing: {mode: fq}\n"))
    # An option bpd refuses, as a newer schema than the daemon would give it.
    monkeypatch.setitem(lab.queueing.options, "total_limit", 0)
    with pytest.raises(LabError) as caught:
        lab.up()
    assert "bpd on n0 exited with status 1" in str(caught.value), caught.value
    assert "total limit must be at least 1" in str(caught.value), caught.value
    assert not {ns for ns in namespaces() if ns.startswith("tbpbad")}


def meshemu(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "meshemu", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


@pytest.mark.root
def test_a_run_records_the_daemons_counters(write, tmp_path):
    experiment = write("bp.yaml", """
topology: {name: tbprun, generate: {kind: chain, n: 4, spacing: 200m}, queueing: {mode: backpressure, threshold: 1}}
duration: 8s
warmup: 1s
traffic:
  - {kind: udp, name: flood, src: n0, dst: n3, rate: 2Mbps, packet: 1000B}
""")
    result = meshemu("run", str(experiment), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    [record] = read_records(tmp_path / "out" / "runs.jsonl")
    assert record["config"]["queueing"] == {"mode": "backpressure", "threshold": 1}
    summary = record["metrics"]["queueing"]
    assert summary["mode"] == "backpressure" and summary["daemons"] == 4
    flood = record["metrics"]["flows"][0]
    at_source = flood["queueing"]
    # 2 Mbit/s into a 3-hop chain that carries about 0.4: the source's daemon
    # drops most at its threshold and injects about what arrives.
    assert at_source["dropped_limit"] > at_source["released"] > 0, at_source
    assert at_source["released"] < 1.5 * flood["packets_received"], (at_source, flood)
    assert summary["flows"]["10.0.0.1"]["released"] >= at_source["released"]  # n0's flow, at every hop
    per_node = json.loads(next((tmp_path / "out" / "runs").glob("*/bpd.json")).read_text())
    assert sorted(per_node) == ["n0", "n1", "n2", "n3"] and not any(c["running"] for c in per_node.values())


def tcp_goodput_bps(record: dict) -> float:
    return sum(flow["goodput_bps"] for flow in record["metrics"]["flows"] if flow["kind"] == "tcp")


def udp_flows(record: dict) -> list[dict]:
    return [flow for flow in record["metrics"]["flows"] if flow["kind"] == "udp"]


@pytest.mark.root
@pytest.mark.slow
def test_grid5_backpressure_holds_the_floods_at_their_sources(tmp_path):
    """experiments/backpressure/grid5.yaml, cases fifo (retry limits 21/12)
    and bp-source-1, seed 1, 40 s, over the window while two UDP floods cross
    at the TCP server. What backpressure guarantees, each by a wide margin:
    the floods' sources inject a few per cent of what they offer (the rest
    is dropped at the source's own threshold, not in the radios on the way),
    so the radio queues on the floods' paths no longer overflow and the
    floods' one-way delay falls from seconds to a few hundred ms; and TCP
    keeps a share of the grid. Measured: seeds 1-3 (README, 2026-11-25)
    about 30 000 radio queue drops with FIFO and none with backpressure,
    mean delay 3-5 s against 0.36 s, backpressure's TCP 226-274 kbit/s;
    seed 1 on 2026-11-26: 28 289 drops against 0, median delay 4.9/6.3 s
    against 0.31/0.25 s, about 250 of 15 300 packets injected per flood,
    TCP 213 and 233 kbit/s (two runs). How much more TCP goodput than
    FIFO's backpressure gives is the study's figure, not a guarantee: one
    run of seed 1 gave 1.19 times FIFO's, others 1.8-3.4 times, because
    FIFO's share depends on which flood captures the grid; the study's
    README reports it over seeds."""
    out = tmp_path / "grid5"
    result = meshemu("run", str(REPO / "experiments/backpressure/grid5.yaml"), "--only", "case=fifo,bp-source-1",
                     "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    records = {record["params"]["case"]: record for record in read_records(out / "runs.jsonl")}
    fifo, backpressure = records["fifo"], records["bp-source-1"]
    for case, record in records.items():
        print(f"{case}: TCP goodput {tcp_goodput_bps(record) / 1e3:.1f} kbit/s, radio queue drops "
              f"{record['metrics']['medium']['total']['queue_drops']}, UDP packets received "
              f"{[flow['packets_received'] for flow in udp_flows(record)]}")
        for flow in udp_flows(record):
            assert flow["packets_received"] > 0, (case, flow)
    for flow in udp_flows(backpressure):
        assert flow["queueing"]["released"] < 0.5 * flow["packets_sent"], flow
    fifo_drops = fifo["metrics"]["medium"]["total"]["queue_drops"]
    bp_drops = backpressure["metrics"]["medium"]["total"]["queue_drops"]
    assert fifo_drops > 5000 and bp_drops < 0.01 * fifo_drops, (fifo_drops, bp_drops)
    for bp_flow, fifo_flow in zip(udp_flows(backpressure), udp_flows(fifo)):
        assert bp_flow["delay_ms"]["p50"] < 0.3 * fifo_flow["delay_ms"]["p50"], (bp_flow, fifo_flow)
    assert tcp_goodput_bps(backpressure) > 80e3
