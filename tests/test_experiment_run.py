"""Experiments in real labs (root): a 2-hop TCP and UDP run end to end,
Ctrl-C in the middle of a sweep then --resume, SIGKILL of the runner then
`meshemu cleanup` and --resume, and the fidelity of the real-time path
against the sim driver (issue 3, item 3)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, ctrl_c_reaches, namespaces, reaped
from meshemu.experiment import metrics
from meshemu import leftovers
from meshemu.bench.soak import KILLED
from meshemu.errors import LabError
from meshemu.experiment.results import read_records
from meshemu.state import RUN_ROOT, lab_names, read_state

pytestmark = [pytest.mark.root, pytest.mark.slow]


def meshemu(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "meshemu", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO)


def run_labs() -> list[str]:
    """Labs of the runner (named x + run id) still on the machine."""
    found = [name for name in lab_names() if name.startswith("x")]
    found += [ns for ns in namespaces() if ns.startswith("x") and "-n" in ns]
    if Path("/etc/netns").is_dir():
        found += [str(p) for p in Path("/etc/netns").glob("x*-n*")]
    return found


def processes_of_runs() -> list[str]:
    """Processes whose command line points into a runner's lab."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = " ".join(part.decode(errors="replace") for part in argv)
        if f"{RUN_ROOT}/x" in text or ("ip netns exec x" in text and "-n" in text):
            found.append(f"{entry.name}: {text}")
    return found


@pytest.fixture(autouse=True)
def nothing_left_behind():
    assert run_labs() == [], "labs of an earlier run are still up"
    yield
    assert run_labs() == []
    assert processes_of_runs() == []


def test_two_hop_tcp_and_udp_run_end_to_end(write, tmp_path):
    experiment = write("two-hop.yaml", """\
description: two hops, TCP then UDP
topology:
  generate: {kind: chain, n: 3, spacing: 200m}
duration: 14s
warmup: 2s
seed: 3
traffic:
  - {kind: tcp, name: tcp, src: n0, dst: n2, cc: reno, start: 0s, stop: 6s, window: 16KB}
  - {kind: udp, name: udp, src: n0, dst: n2, rate: 300kbps, packet: 1000B, start: 8s, stop: 14s}
measure: {capture: true, sim_reference: true, drain: 2s}
""")
    out = tmp_path / "results"
    result = meshemu("run", str(experiment), "--out", str(out))
    assert result.returncode == 0, result.stderr
    [record] = read_records(out / "runs.jsonl")
    assert record["seed"] == 3 and record["software"]["meshemu"]
    assert record["config"]["medium"]["seed"] == 3
    tcp, udp = record["metrics"]["flows"]
    # Two hops of 2 Mbit/s with RTS/CTS: TCP gets well below the 1-hop ceiling (~1.5 Mbit/s).
    assert tcp["hops"] == 2 and 0.2e6 < tcp["goodput_bps"] < 1.2e6, tcp
    # The counters of one tcp_info snapshot account for each other: bytes sent
    # in the window = acknowledged + retransmitted + the change of what is in
    # flight (segments of one MSS in a bulk transfer).
    rows = sorted(metrics.data_socket(metrics.read_jsonl(out / "runs" / record["run_id"] / "tcp.tcpinfo.jsonl"),
                                      record["config"]["traffic"][0]["port"]), key=lambda row: row["time_ns"])
    window = [row for row in rows if row["state"] == 1]
    first, last = window[0], window[-1]
    flight = (last["unacked"] - first["unacked"]) * tcp["mss"]
    sent = last["bytes_sent"] - first["bytes_sent"]
    accounted = last["bytes_acked"] - first["bytes_acked"] + last["bytes_retrans"] - first["bytes_retrans"] + flight
    assert abs(sent - accounted) <= 2 * tcp["mss"], (sent, accounted)
    assert tcp["goodput_bps"] <= tcp["throughput_bps"] == pytest.approx(
        (tcp["bytes_acked"] + tcp["bytes_retrans"]) * 8 / tcp["window_s"])
    assert tcp["congestion"] == "reno" and tcp["rtt_ms"]["mean"] > 5
    assert tcp["received_bytes"] > 0 and tcp["captured_segments"] > 50
    # 300 kbit/s fits in two hops: (almost) everything arrives, with a delay above two airtimes (~12 ms).
    # TCP's stop is when iperf3 stops writing; what its socket and the radio queue still hold drains after
    # it. With an autotuned window that was up to 170 segments (2.5 s at two hops), and the UDP flow
    # started into it lost 6 % at n0's full queue; a 16 KB window bounds the backlog to well under the gap.
    assert udp["hops"] == 2 and udp["packets_sent"] == pytest.approx(6 * 300e3 / 8 / 1000, abs=2)
    assert udp["loss"] < 0.05 and udp["goodput_bps"] == pytest.approx(300e3, rel=0.06)
    assert 10 < udp["delay_ms"]["p50"] < 2000 and udp["jitter_ms"] >= 0
    assert udp["sim_ratio"] == pytest.approx(1.0, abs=0.1)
    total = record["metrics"]["medium"]["total"]
    assert total["tx_data_frames"] > 100 and total["rts_attempts"] >= total["tx_data_frames"]
    assert 0 < total["busy_fraction"] < 1 and total["backoffs_per_s"] > 0
    assert record["metrics"]["routing"] == {"control_bytes": 0, "control_packets": 0, "normalized_overhead": 0.0}
    # The relay's kernel forwarded every datagram that arrived, and TCP's segments both ways.
    forwarded = record["metrics"]["kernel"]["nodes"]["n1"]["Ip"]["ForwDatagrams"]
    assert forwarded >= udp["packets_received"] + tcp["bytes_acked"] / tcp["mss"], forwarded
    assert record["lateness"]["count"] > 0 and isinstance(record["behind_real_time"], bool)
    # The runner's own CPU: bringing a lab up takes some (Python, `ip netns exec` helpers); a 12 s run
    # takes less than its length (a fraction of one core).
    cpu = record["runner_cpu_s"]
    assert set(cpu) == {"bring_up", "run"} and cpu["bring_up"] > 0 and 0 <= cpu["run"] < 12, cpu
    artefacts = out / "runs" / record["run_id"]
    for name in ("tcp.tcpinfo.jsonl", "tcp.events.jsonl", "udp.recv.jsonl", "udp.send.json", "stats.jsonl",
                 "sim.json", "processes.json"):
        assert (artefacts / name).stat().st_size > 0, name
    csv_lines = (out / "runs.csv").read_text().splitlines()
    assert len(csv_lines) == 2 and "flows.tcp.goodput_bps" in csv_lines[0]
    assert "runner_cpu_s.bring_up" in csv_lines[0] and "runner_cpu_s.run" in csv_lines[0]
    report = meshemu("report", str(out), "--trace", record["run_id"])
    assert report.returncode == 0, report.stderr
    assert f"runner CPU per run, median over 1 runs: bring-up {cpu['bring_up']:.2f} s" in report.stdout
    assert (out / "report" / "tcp-goodput_bps_vs_hops.svg").is_file()
    assert (out / "report" / f"trace_{record['run_id']}_tcp_seq.png").is_file()



def test_a_server_slow_to_listen_still_gets_its_flow(write, tmp_path):
    # Under a VM's software emulation iperf3's server took more than the 1.5 s once given to every receiver
    # (a failed run: "nothing listens on tcp port 5201"); servers now start before time 0 is set.
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    iperf3 = wrappers / "iperf3"
    iperf3.write_text(f'#!/bin/sh\n[ "$1" = -s ] && sleep 3\nexec {shutil.which("iperf3")} "$@"\n')
    iperf3.chmod(0o755)
    experiment = write("slow-server.yaml", """\
description: one hop, a server that takes 3 s to start
topology:
  generate: {kind: chain, n: 2, spacing: 100m}
duration: 4s
seed: 1
traffic:
  - {kind: tcp, name: tcp, src: n0, dst: n1, start: 0s, stop: 3s}
measure: {drain: 0s}
""")
    out = tmp_path / "results"
    env = {**os.environ, "PATH": f"{wrappers}:{os.environ['PATH']}"}
    result = subprocess.run([sys.executable, "-m", "meshemu", "run", str(experiment), "--out", str(out)],
                            capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert result.returncode == 0, result.stderr
    [record] = read_records(out / "runs.jsonl")
    [tcp] = record["metrics"]["flows"]
    assert tcp["goodput_bps"] > 0.2e6, tcp

def test_ctrl_c_in_a_sweep_then_resume_loses_and_duplicates_nothing(write, tmp_path):
    experiment = write("sweep.yaml", """\
description: 22 very short runs
topology:
  generate: {kind: chain, n: 2, spacing: 200m}
duration: 1s
seeds: [1, 2]
traffic:
  - {kind: command, node: n0, argv: [ping, -c, "1", -W, "1", n1]}
measure: {drain: 0s}
sweep:
  topology.generate.n: [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
""")
    out = tmp_path / "results"
    runner = subprocess.Popen([sys.executable, "-m", "meshemu", "run", str(experiment), "--out", str(out)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                              preexec_fn=ctrl_c_reaches)
    with reaped(runner):
        deadline = time.monotonic() + 240
        while len(read_records(out / "runs.jsonl")) < 3 and time.monotonic() < deadline and runner.poll() is None:
            time.sleep(0.2)
        time.sleep(1.0)  # into the middle of the next run
        runner.send_signal(signal.SIGINT)
        time.sleep(0.3)
        runner.send_signal(signal.SIGINT)  # a second Ctrl-C while it tears down
        _, stderr = runner.communicate(timeout=120)
    assert runner.returncode == 130, stderr
    assert "interrupted" in stderr
    assert run_labs() == [] and processes_of_runs() == []
    first = read_records(out / "runs.jsonl")
    assert 3 <= len(first) < 22
    assert not list((out / "runs").glob("*.partial"))

    resumed = meshemu("run", str(experiment), "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(first)} recorded before (skipped)" in resumed.stderr
    records = read_records(out / "runs.jsonl")
    ids = [record["run_id"] for record in records]
    assert len(ids) == 22 and len(set(ids)) == 22
    planned = meshemu("run", str(experiment), "--out", str(out), "--dry-run").stdout.split()[::3]
    assert set(ids) == set(planned)
    assert all(record["metrics"]["flows"][0]["returncode"] == 0 for record in records)
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(ids)
    # Without --resume an existing results directory is refused.
    again = meshemu("run", str(experiment), "--out", str(out))
    assert again.returncode == 1 and "--resume" in again.stderr


def lab_dirs() -> set[str]:
    return {entry.name for entry in RUN_ROOT.iterdir()} if RUN_ROOT.is_dir() else set()


def medium_and_daemons_up(run_dir: Path) -> bool:
    try:
        roles = [record.role for record in read_state(run_dir).processes]
    except LabError:
        return False
    return "medium" in roles and roles.count("node") >= 3  # aodvd in each of the three nodes


@pytest.mark.parametrize("moment", ["bring-up", "traffic"])
def test_sigkill_of_the_runner_then_cleanup_leaves_the_host_as_it_was(write, tmp_path, moment):
    """kill -9 of `meshemu run` leaves its medium, daemons and traffic
    running; `meshemu cleanup` removes them all, and --resume runs the
    killed run again into one complete record (issue 19, item 6)."""
    experiment = write("killed.yaml", KILLED)
    out = tmp_path / "results"
    before = leftovers.snapshot()
    runner = subprocess.Popen([sys.executable, "-m", "meshemu", "run", str(experiment), "--out", str(out)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    with reaped(runner):
        deadline = time.monotonic() + 60
        started: set[str] = set()
        while not started and time.monotonic() < deadline and runner.poll() is None:
            started = lab_dirs() - {"by-netns"}
            time.sleep(0.01)
        assert started, "the runner never started its lab"
        if moment == "traffic":
            [name] = started
            while not medium_and_daemons_up(RUN_ROOT / name) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(2.0)
        runner.kill()
        runner.wait(timeout=10)
    cleanup = meshemu("cleanup")
    assert cleanup.returncode == 0, cleanup.stderr
    assert leftovers.differences(before, leftovers.snapshot()) == {}
    assert read_records(out / "runs.jsonl") == []
    resumed = meshemu("run", str(experiment), "--out", str(out), "--resume")
    assert resumed.returncode == 0, resumed.stderr
    [record] = read_records(out / "runs.jsonl")
    assert record["metrics"]["flows"][0]["packets_received"] > 0, record["metrics"]["flows"][0]
    assert leftovers.differences(before, leftovers.snapshot()) == {}


FIDELITY = """\
description: iperf3 UDP saturation across chain7 vs the sim driver
topology: {{file: {chain}}}
duration: 24s
warmup: 4s
seed: 1
traffic:
  - {{kind: udp, name: udp, tool: iperf3, src: n0, dst: n7, rate: 2Mbps, packet: 1460B}}
measure: {{sim_reference: true, sim_seeds: 10, drain: 1s}}
sweep:
  traffic.0.dst: [n1, n3, n7]
"""


def test_real_time_udp_saturation_falls_among_the_sim_drivers_seeds(write, tmp_path):
    """Issue 3, item 3: iperf3 -u -l 1460 (1488-byte IP packets) at 2 Mbit/s
    offered, over 1, 3 and 7 hops of chain7 (ns2-wavelan), against the sim
    driver over 10 seeds with the same medium, packet size and offered load,
    counted as iperf3 counts (arrivals in the window). One lab run is one
    sample: it must fall among the sim's seeds, give or take 10 %. Measured
    2026-11-26 at 7 hops, 6 lab runs of seed 1: 0.215-0.253 Mbit/s against
    the sim's 0.212-0.235 (5 seeds); 1 and 3 hops within 0.3 % of the sim.
    Counted the other way (the window's own packets that arrived by the 1-s
    drain's end) the sim gave 0.168-0.204, and this test failed."""
    experiment = write("fidelity.yaml", FIDELITY.format(chain=REPO / "topologies" / "chain7.yaml"))
    out = tmp_path / "results"
    result = meshemu("run", str(experiment), "--out", str(out))
    assert result.returncode == 0, result.stderr
    records = read_records(out / "runs.jsonl")
    assert len(records) == 3
    ratios = {}
    for record in records:
        [flow] = record["metrics"]["flows"]
        assert len(flow["sim_seeds"]) == 10
        ratios[flow["hops"]] = (flow["goodput_bps"], flow["sim_goodput_bps"], flow["sim_goodput_min_bps"],
                                flow["sim_goodput_max_bps"], flow["sim_ratio"], record["lateness"]["p99_ns"])
    print(json.dumps(ratios))
    assert set(ratios) == {1, 3, 7}
    for hops, (lab, sim, low, high, _, _) in ratios.items():
        assert 0.9 * low <= lab <= 1.1 * high, (f"{hops} hops: lab {lab / 1e6:.3f} vs sim mean {sim / 1e6:.3f} "
                                                f"(seeds {low / 1e6:.3f}..{high / 1e6:.3f}) Mbit/s")
