"""The backpressure daemon `bpd` in labs (root): its life cycle, and the
paper's chain result: with threshold 1 a UDP source far above capacity
injects only about what the chain delivers, and the chain delivers about as
much as with fair queuing alone (Gupta et al. §4.4)."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from meshemu.lab import Lab, Node
from meshemu.medium import find_program
from meshemu.state import IptablesRule, record_iptables_rules

BPD = find_program("bpd")
UDP = find_program("meshemu-udp")
BEACON_PORT = 6710


def rule() -> list[str]:
    """The rule bpd adds (routing/backpressure/README.md), recorded before it starts."""
    return ["-o", "wlan0", "-j", "NFQUEUE", "--queue-num", "0", "--queue-bypass"]


def chain_topology(name: str, nodes: int) -> str:
    return f"""name: {name}
profile: ns2-wavelan
seed: 1
routing: static
defaults: {{promiscuous: true}}
generate: {{kind: chain, n: {nodes}, spacing: 200m}}
"""


def start_lab(tmp_path: Path, name: str, nodes: int) -> Lab:
    path = tmp_path / f"{name}.yaml"
    path.write_text(chain_topology(name, nodes))
    lab = Lab.from_file(path)
    # Beacons go to the head of the interface queue, as routing control does.
    lab.config["priority_udp_ports"] = sorted({*lab.config["priority_udp_ports"], BEACON_PORT})
    return lab.up()


def start_daemons(lab: Lab, args: list[str], out: Path) -> dict[str, subprocess.Popen]:
    daemons = {}
    record_iptables_rules(lab.run_dir, [IptablesRule(node.netns, "mangle", "POSTROUTING", rule()) for node in lab])
    for node in lab:
        stderr = open(out / f"{node.name}.err", "w")
        daemons[node.name] = node.spawn([str(BPD), *args, "--counters", str(out / f"{node.name}.json")], stderr=stderr)
    deadline = time.monotonic() + 10
    while not all((out / f"{name}.json").exists() for name in daemons):
        for name, daemon in daemons.items():
            assert daemon.poll() is None, f"bpd on {name} exited: {(out / f'{name}.err').read_text()}"
        assert time.monotonic() < deadline, "the daemons did not write their counters"
        time.sleep(0.05)
    return daemons


def stop_daemons(daemons: dict, out: Path) -> dict[str, dict]:
    for daemon in daemons.values():
        daemon.terminate()
    counters = {}
    for name, daemon in daemons.items():
        assert daemon.wait(10) == 0, (out / f"{name}.err").read_text()
        counters[name] = json.loads((out / f"{name}.json").read_text())
    return counters


def nfqueue_rules(node: Node) -> list[str]:
    listing = node.run(["iptables", "-t", "mangle", "-S", "POSTROUTING"], check=True).stdout
    return [line for line in listing.splitlines() if "NFQUEUE" in line]


def check_balance(counters: dict) -> None:
    """Every packet that arrived got exactly one fate, and none is left held."""
    totals = counters["totals"]
    fates = (totals["released"] + totals["dropped_limit"] + totals["dropped_full"] + totals["dropped_age"]
             + totals["shutdown_accepted"] + totals["shutdown_dropped"])
    assert totals["enqueued"] == fates, totals
    assert counters["held"] == 0 and counters["running"] is False


def test_bpd_refuses_bad_options_naming_them():
    result = subprocess.run([str(BPD), "--mode", "backpressure", "--classify", "next-hop"],
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 1
    assert "next-hop" in result.stderr and "source or destination" in result.stderr, result.stderr
    result = subprocess.run([str(BPD), "--max-hold", "forever"], capture_output=True, text=True, timeout=10)
    assert result.returncode == 2 and "--max-hold" in result.stderr, result.stderr


@pytest.mark.root
def test_bpd_forwards_queues_and_cleans_up(tmp_path):
    lab = start_lab(tmp_path, "tbplife", 3)
    try:
        n0, n2 = lab["n0"], lab["n2"]
        daemons = start_daemons(lab, ["--mode", "fq", "--classify", "destination"], tmp_path)
        assert len(nfqueue_rules(n0)) == 1
        ping = n0.run(["ping", "-n", "-c", "5", "-i", "0.2", "-W", "2", n2.ip], timeout=30)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        counters = stop_daemons(daemons, tmp_path)
        assert nfqueue_rules(n0) == [] and nfqueue_rules(lab["n1"]) == []
        for name, node_counters in counters.items():
            check_balance(node_counters)
        # The echo requests were queued at n0 and n1 under n2's flow, the replies at n2 and n1.
        flows = {flow["flow"]: flow for flow in counters["n1"]["flows"]}
        assert flows[n2.ip]["released"] >= 5 and flows[n0.ip]["released"] >= 5, flows
        assert counters["n0"]["io"]["route_lookups"] >= 1
        # Every queued packet's handling was timed (packets drained at exit are not).
        assert counters["n0"]["processing"]["count"] >= counters["n0"]["totals"]["enqueued"] > 0
        # Without the daemons the node still forwards.
        assert n0.run(["ping", "-n", "-c", "1", "-W", "2", n2.ip], timeout=10).returncode == 0
    finally:
        lab.down()


@pytest.mark.root
def test_a_vanished_next_hop_holds_nothing_for_long(tmp_path):
    """The relay of a flow leaves radio range: the source's daemon keeps
    running, holds at most its threshold, and every packet gets a verdict."""
    lab = start_lab(tmp_path, "tbpgone", 3)
    try:
        daemons = start_daemons(lab, ["--mode", "backpressure", "--threshold", "1", "--max-hold", "500ms"], tmp_path)
        sink = lab["n2"]
        send = lab["n0"].spawn([str(UDP), "send", "--dst", f"{sink.ip}:5001", "--rate", "500kbps", "--size", "1000",
                                "--duration", "8s"])
        time.sleep(2)
        lab.move("n1", 5000, 5000)
        time.sleep(3)
        counters = json.loads((tmp_path / "n0.json").read_text())
        assert daemons["n0"].poll() is None
        assert counters["held"] <= 1, counters["held"]
        assert send.wait(15) == 0
        counters = stop_daemons(daemons, tmp_path)
        check_balance(counters["n0"])
        flow = next(f for f in counters["n0"]["flows"] if f["flow"] == lab["n0"].ip)
        assert flow["dropped_limit"] > 0 and flow["released"] > 0, flow
        assert counters["n0"]["downstream"]["overhear_timeouts"] > 0
    finally:
        lab.down()


@dataclass
class Run:
    injected: int  # frames the source put on the air (acknowledged + dropped at the retry limit)
    released: int  # packets the source's daemon released
    delivered: int  # packets the receiver got

    def __str__(self) -> str:
        return f"injected {self.injected} (released {self.released}), delivered {self.delivered}"


def udp_run(lab: Lab, args: list[str], out: Path, seconds: int) -> Run:
    source, sink = lab["n0"], lab[f"n{len(lab) - 1}"]
    out.mkdir()
    daemons = start_daemons(lab, args, out)
    receiver = sink.spawn([str(UDP), "recv", "--port", "5001", "--duration", f"{seconds + 8}s", "--json",
                           "--interval", "0s"], stdout=open(out / "recv.json", "w"))
    time.sleep(0.5)
    before = lab.stats(source.name)[source.name]
    send = source.run([str(UDP), "send", "--dst", f"{sink.ip}:5001", "--rate", "2Mbps", "--size", "1460",
                       "--duration", f"{seconds}s", "--json"], timeout=seconds + 30)
    assert send.returncode == 0, send.stderr
    time.sleep(3)  # let the chain drain
    after = lab.stats(source.name)[source.name]
    assert receiver.wait(seconds + 20) == 0
    counters = stop_daemons(daemons, out)
    for node_counters in counters.values():
        check_balance(node_counters)
    flows = [json.loads(line) for line in (out / "recv.json").read_text().splitlines()]
    delivered = sum(flow["packets"] for flow in flows if flow.get("type") == "flow")
    injected = sum(after[key] - before[key] for key in ("tx_data_frames", "retry_drops"))
    return Run(injected, counters["n0"]["totals"]["released"], delivered)


@pytest.mark.root
@pytest.mark.slow
def test_backpressure_injects_about_what_a_chain_delivers(tmp_path):
    """A 7-hop chain, a UDP source at 2 Mbit/s (far above what the chain
    carries): per-flow fair queuing lets the source put far more on the air
    than arrives; backpressure with threshold 1 (overhearing, and the
    paper's oracle) injects about what is delivered, and delivers about as
    much (measured: 0.83-0.96 of fq's deliveries; 0.7 leaves room for a
    loaded machine)."""
    lab = start_lab(tmp_path, "tbpchain", 8)
    try:
        oracle = str(lab.run_dir / "bpd-oracle")
        runs = {
            "fq": udp_run(lab, ["--mode", "fq"], tmp_path / "fq", 15),
            "overhear": udp_run(lab, ["--mode", "backpressure", "--threshold", "1"], tmp_path / "overhear", 15),
            "oracle": udp_run(lab, ["--mode", "backpressure", "--threshold", "1", "--knowledge", "oracle",
                                    "--oracle", oracle], tmp_path / "oracle", 15),
        }
    finally:
        lab.down()
    for name, run in runs.items():
        print(f"{name}: {run}")
    fq = runs["fq"]
    assert fq.injected > 1.3 * fq.delivered, f"fair queuing should over-inject: {fq}"
    for name in ("overhear", "oracle"):
        run = runs[name]
        assert run.injected < 0.75 * fq.injected, f"{name} injects nearly as much as fq: {run} vs {fq}"
        assert run.injected < 1.2 * run.delivered, f"{name} injects much more than it delivers: {run}"
        assert run.delivered > 0.7 * fq.delivered, f"{name} delivers much less than fq: {run} vs {fq}"
