"""The sim driver (meshemu/sim/): what it refuses, the scenario it writes
(the same function as a lab run's sim reference), its metrics with the
lab's names, whole runs through `meshemu run --driver sim`, and `meshemu
report --compare driver` over lab, ns-2 and sim runs. The sim runs these
small cases in milliseconds."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, ctrl_c_reaches
from meshemu import medium
from meshemu.errors import ConfigError
from meshemu.experiment import execute
from meshemu.experiment.plan import plan_experiment
from meshemu.experiment.results import read_records
from meshemu.experiment.runs import LAB, NS2, SIM
from meshemu.sim import scenario as sim_scenario
from meshemu.sim.driver import SimExecution
from meshemu.source import load_yaml

CHAIN = """\
description: a 2-hop chain, two UDP flows
topology:
  generate: {kind: chain, n: 3, spacing: 200m}
duration: 8s
warmup: 2s
seed: 3
traffic:
  - {kind: udp, name: cbr, src: n0, dst: n2, rate: 200kbps, packet: 1000B, start: 1s}
  - {kind: udp, name: late, src: n2, dst: n1, rate: 100kbps, packet: 500B, start: 4s, stop: 7s, tool: iperf3}
"""


def plan(write, text: str, driver: str = SIM):
    return plan_experiment(load_yaml(write("exp.yaml", text)), driver=driver)


def problems(write, text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        plan(write, text)
    return "\n".join(str(problem) for problem in caught.value.problems)


def meshemu(*args: str) -> subprocess.CompletedProcess[str]:
    # Wide enough for the report's tables on one line each.
    return subprocess.run([sys.executable, "-m", "meshemu", *args], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={**os.environ, "COLUMNS": "200"})


# --- the scenario ----------------------------------------------------------------------------

def test_the_scenario_is_the_runs_udp_flows_at_the_labs_packets_and_packet_rate(write):
    [run] = plan(write, CHAIN).runs
    scenario = sim_scenario.scenario(run)
    assert scenario["medium"] == run.topology.medium and scenario["medium"]["seed"] == 3
    # Counters at the warm-up's end and the run's end; packets in flight arrive in the 2-s drain.
    assert (scenario["duration_ns"], scenario["warmup_ns"], scenario["routing"]) == (10e9, 2e9, "static")
    assert scenario["snapshots_ns"] == [2_000_000_000, 8_000_000_000]
    # IP packets of payload + 28 B, at the payload rate's packet rate: 25 and 25 packets/s.
    assert scenario["flows"] == [
        {"name": "cbr", "src": 0, "dst": 2, "packet_bytes": 1028, "traffic": {"kind": "cbr", "rate_bps": 205600},
         "start_ns": 1_000_000_000, "stop_ns": 8_000_000_000},
        {"name": "late", "src": 2, "dst": 1, "packet_bytes": 528, "traffic": {"kind": "cbr", "rate_bps": 105600},
         "start_ns": 4_000_000_000, "stop_ns": 7_000_000_000}]
    other = sim_scenario.scenario(run, seed=9)
    assert other["medium"]["seed"] == 9 and run.topology.medium["seed"] == 3


def _figures(name: str, generated: int, delivered: int) -> dict:
    # One packet sent before the window arrived in it: in `delivered` (what
    # iperf3 counts), not among the window's own (what meshemu-udp counts).
    return {"name": name, "generated": generated, "delivered": delivered + 1, "generated_delivered": delivered,
            "delivered_bytes": 0,
            "throughput_bps": 0.0, "delay_ns": {"mean": 5e6, "p50": 4_000_000, "p95": 9_000_000, "max": 12_000_000},
            "source_queue_drops": 2, "hops": 2}


def test_a_lab_runs_sim_reference_goes_through_the_same_scenario_and_metrics(write, tmp_path, monkeypatch):
    [run] = plan(write, CHAIN.replace("seed: 3", "seed: 3\nmeasure: {sim_reference: true, sim_seeds: 2}"), LAB).runs
    given = []

    def sim(scenario: dict) -> dict:
        given.append(scenario)
        seed = scenario["medium"]["seed"]
        return {"flows": [_figures("cbr", 150, 140 + seed), _figures("late", 75, 75)]}

    monkeypatch.setattr(medium, "sim", sim)
    execution = execute.Execution(run, "x", tmp_path, execute.Tools(), threading.Event())
    flows = [{"name": "cbr", "goodput_bps": 100_000.0}, {"name": "late", "goodput_bps": 50_000.0}]
    execution._add_sim_reference(flows)
    assert given == [sim_scenario.scenario(run, 3), sim_scenario.scenario(run, 4)]
    # 143 and 144 packets of 1000 B over the 6-s window.
    assert flows[0]["sim_goodput_min_bps"] == pytest.approx(143 * 8000 / 6)
    assert flows[0]["sim_goodput_bps"] == pytest.approx(143.5 * 8000 / 6)
    # The iperf3 flow counts the 76 arrivals in its window.
    assert flows[1]["sim_goodput_bps"] == pytest.approx(76 * 4000 / 3) and flows[1]["sim_seeds"] == [3, 4]
    assert json.loads((tmp_path / "sim.json").read_text())["seeds"] == [3, 4]


# --- refusals ---------------------------------------------------------------------------------

def test_what_the_sim_cannot_do_is_refused_naming_each_key(write):
    found = problems(write, """\
topology:
  generate: {kind: chain, n: 3, spacing: 200m}
  queueing: {mode: fq, classify: source}
duration: 10s
sysctl: {net.ipv4.tcp_ecn: 1}
measure: {capture: true, sim_reference: true}
traffic:
  - {kind: udp, src: n0, dst: n2, rate: 100kbps, packet: 500B}
  - {kind: tcp, src: n0, dst: n2, cc: reno}
  - {kind: tfrc, src: n0, dst: n2}
  - {kind: command, node: n1, argv: [ping, n0]}
""")
    for expected in ("exp.yaml:3:13: topology.queueing: bpd is a daemon that runs in labs only",
                     "exp.yaml:5:9: sysctl: sysctl sets the Linux kernels of a lab's nodes",
                     "exp.yaml:6:20: measure.capture: measure.capture adds metrics of labs",
                     "exp.yaml:6:41: measure.sim_reference: measure.sim_reference adds metrics of labs",
                     "exp.yaml:9:12: traffic[1].kind: a tcp flow needs a TCP stack (a lab's kernel, or ns-2's "
                     "agents: --driver ns2); the sim runs udp flows (constant bit rate)",
                     "traffic[2].kind: a tfrc flow is our TFRC tool, which runs in labs only",
                     "traffic[3].kind: a command flow runs a program in a lab's node"):
        assert expected in found, f"{expected!r} not in\n{found}"
    assert "traffic[0]" not in found


@pytest.mark.parametrize("routing, where", [
    ("aodv", "in labs and in ns-2: --driver lab or ns2"), ("dsdv", "in ns-2 only: --driver ns2"),
    ("copas", "in labs: --driver lab"), ("none", "in labs: --driver lab")])
def test_routing_other_than_static_is_refused_saying_where_it_runs(write, routing, where):
    found = problems(write, CHAIN.replace("  generate:", f"  routing: {routing}\n  generate:"))
    assert (f"exp.yaml:3:12: topology.routing: the sim driver routes every flow statically (minimum hops at time "
            f"0): use routing: static (routing {routing} runs {where})") in found


def test_hwsim_radios_are_refused(write):
    found = problems(write, CHAIN.replace("  generate:", "  backend: hwsim\n  generate:"))
    assert "topology.backend: mac80211_hwsim radios belong to a lab" in found


def test_a_sweep_runs_its_udp_cases_and_skips_the_rest_saying_why(write):
    p = plan(write, CHAIN + """\
sweep:
  case:
    udp: {}
    tcp: {traffic.1: {kind: tcp, name: bulk, src: n2, dst: n0, cc: reno}}
""")
    assert [run.params["case"] for run in p.runs] == ["udp"]
    [skipped] = p.skipped
    # Located where the case writes the flow.
    assert skipped.params == {"case": "tcp"} and "sweep.case.tcp.traffic.1.kind: a tcp flow needs a TCP stack" \
        in skipped.reason


def test_run_ids_differ_between_the_three_drivers(write):
    ids = {driver: plan(write, CHAIN, driver).runs[0].run_id for driver in (LAB, SIM)}
    ids[NS2] = plan(write, CHAIN.replace("  generate:", "  routing: dsdv\n  generate:"), NS2).runs[0].run_id
    assert len(set(ids.values())) == 3
    [sim] = plan(write, CHAIN).runs
    assert sim.driver == SIM and sim.config == plan(write, CHAIN, LAB).runs[0].config


# --- the metrics --------------------------------------------------------------------------------

def _node(name: str, **counters: int) -> dict:
    return {"name": name, "tx_data_frames": 0, "retry_drops": 0, "rts_attempts": 0, "busy_ns": 0, "backoffs": 0,
            "queue_len": 0, "queue_len_max": 0, "link_drops": 0, "rts_attempts_hist": [0, 0], **counters}


def test_the_sims_output_becomes_the_labs_metrics(write, tmp_path):
    [run] = plan(write, CHAIN).runs
    output = {"flows": [_figures("late", 75, 70), {**_figures("cbr", 150, 0), "delivered": 0}],
              "snapshots": [
                  {"t_ns": 2_000_000_000, "nodes": [_node("n0", tx_data_frames=20, busy_ns=10**9), _node("n1"),
                                                    _node("n2")]},
                  {"t_ns": 8_000_000_000,
                   "nodes": [_node("n0", tx_data_frames=170, retry_drops=3, rts_attempts=200, busy_ns=4 * 10**9,
                                   backoffs=300, queue_len=1, queue_len_max=9, link_drops=4,
                                   rts_attempts_hist=[150, 3]), _node("n1"), _node("n2")]}],
              # The end of the drain: not what a lab reads.
              "nodes": [_node("n0", tx_data_frames=999), _node("n1"), _node("n2")]}
    found = SimExecution(run, tmp_path, "meshemu-medium", None, threading.Event())._metrics(output)
    late, cbr = found["flows"][1], found["flows"][0]
    assert (cbr["name"], cbr["hops"], cbr["window_s"], cbr["goodput_bps"]) == ("cbr", 2, 6.0, 0.0)
    assert cbr["loss"] == 1.0 and cbr["delay_ms"] is None and cbr["route_length"] is None
    # iperf3: the 71 arrivals in the window; loss: the window's own 70 of 75.
    assert late["window_s"] == 3.0 and late["goodput_bps"] == pytest.approx(71 * 500 * 8 / 3)
    assert (late["packets_sent"], late["packets_received"], late["source_queue_drops"]) == (75, 71, 2)
    assert late["loss"] == pytest.approx(5 / 75) and late["offered_bps"] == 100_000 and late["route_length"] == 2.0
    assert late["delay_ms"] == {"mean": 5.0, "p50": 4.0, "p95": 9.0, "max": 12.0}
    n0 = found["medium"]["nodes"]["n0"]
    # Counters over [warmup, duration] (6 s), gauges at the end, the lab's derived figures.
    assert (n0["tx_data_frames"], n0["retry_drops"], n0["link_drops"], n0["queue_len_max"]) == (150, 3, 4, 9)
    assert n0["mac_drop_fraction"] == pytest.approx(3 / 153) and n0["backoffs_per_s"] == 50.0
    assert n0["busy_fraction"] == pytest.approx(0.5) and n0["rts_attempts_hist"] == [150, 3]
    assert "name" not in n0 and found["medium"]["total"]["tx_data_frames"] == 150
    assert found["routing"] == {"control_bytes": 0, "control_packets": 0, "normalized_overhead": 0.0}


# --- whole runs --------------------------------------------------------------------------------

def test_meshemu_run_driver_sim_records_runs_and_resumes(write, tmp_path):
    experiment = write("chain.yaml", CHAIN.replace("seed: 3", "seeds: [1, 2]"))
    out = tmp_path / "results"
    result = meshemu("run", str(experiment), "--driver", "sim", "--out", str(out), "--jobs", "2")
    assert result.returncode == 0, result.stderr
    records = read_records(out / "runs.jsonl")
    assert sorted(record["seed"] for record in records) == [1, 2]
    record = next(record for record in records if record["seed"] == 1)
    assert record["driver"] == "sim" and record["lateness"] is None and record["behind_real_time"] is False
    section = record["sim"]
    assert section["seed"] == 1 and len(section["trace_digest"]) == 64 and section["events"] > 0
    assert section["version"].startswith("meshemu-medium ")
    flows = {flow["name"]: flow for flow in record["metrics"]["flows"]}
    # 25 packets/s over [2 s, 8 s) and [4 s, 7 s): a light load that the chain carries whole, as a lab counts it.
    assert (flows["cbr"]["packets_sent"], flows["cbr"]["packets_received"], flows["cbr"]["loss"]) == (150, 150, 0)
    assert flows["cbr"]["goodput_bps"] == pytest.approx(200_000)
    assert flows["late"]["packets_sent"] == 75 and flows["late"]["route_length"] == 1.0
    n1 = record["metrics"]["medium"]["nodes"]["n1"]
    assert n1["tx_data_frames"] >= 150 and n1["busy_fraction"] > 0
    artefacts = out / "runs" / record["run_id"]
    # The kept scenario reruns by hand to the same output.
    rerun = subprocess.run([str(medium.find_program()), "sim", "scenario.json"], cwd=artefacts, capture_output=True,
                           text=True, timeout=60, check=True)
    assert json.loads(rerun.stdout)["trace_digest"] == section["trace_digest"]
    assert json.loads((artefacts / "output.json").read_text())["trace_digest"] == section["trace_digest"]
    again = meshemu("run", str(experiment), "--driver", "sim", "--out", str(out), "--resume")
    assert again.returncode == 0 and "2 recorded before (skipped)" in again.stderr


def test_a_file_with_nothing_the_sim_can_run_is_an_error(write, tmp_path):
    tcp_only = CHAIN.split("traffic:")[0] + "traffic:\n  - {kind: tcp, src: n0, dst: n2, cc: reno}\n"
    experiment = write("tcp.yaml", tcp_only)
    result = meshemu("run", str(experiment), "--driver", "sim", "--out", str(tmp_path / "results"))
    assert result.returncode == 1
    assert "traffic[0].kind: a tcp flow needs a TCP stack" in result.stderr


def _sims_in(directory: Path) -> list[str]:
    """Processes whose working directory is inside `directory`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and Path(entry / "cwd").resolve().is_relative_to(directory):
                found.append(entry.name)
        except OSError:
            continue
    return found


def test_ctrl_c_stops_the_sim_and_records_nothing(write, tmp_path):
    experiment = write("long.yaml", """\
topology:
  generate: {kind: grid, rows: 6, cols: 6, spacing: 200m}
duration: 3600s
traffic:
  - {kind: udp, src: n0, dst: n35, rate: 2Mbps, packet: 1460B}
  - {kind: udp, src: n5, dst: n30, rate: 2Mbps, packet: 1460B}
""")
    out = tmp_path / "results"
    process = subprocess.Popen([sys.executable, "-m", "meshemu", "run", str(experiment), "--driver", "sim", "--out",
                                str(out)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               preexec_fn=ctrl_c_reaches)
    deadline = time.monotonic() + 60
    while not _sims_in(out) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _sims_in(out), "meshemu-medium sim is not running"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert read_records(out / "runs.jsonl") == [] and not list(out.glob("runs/*"))
    assert _sims_in(out) == []


# --- the report ----------------------------------------------------------------------------------

def _record(driver: str, seed: int, goodput: float, n: int) -> dict:
    return {"run_id": f"{driver}-{n}-{seed}", "experiment": "e", "driver": driver,
            "params": {"topology.generate.n": n}, "seed": seed,
            "metrics": {"flows": [{"name": "f", "hops": n - 1, "goodput_bps": goodput}],
                        "medium": {"total": {"retry_drops": 10 * seed}}, "routing": None}}


def test_report_sets_lab_ns2_and_sim_side_by_side(tmp_path):
    directory = tmp_path / "results"
    directory.mkdir()
    base = {"lab": 500_000, "ns2": 480_000, "sim": 490_000}
    records = [_record(driver, seed, base[driver] + 1000 * seed * (1 + (driver == "sim")), n)
               for driver in base for seed in (1, 2, 3) for n in (2, 4)]
    (directory / "runs.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    result = meshemu("report", str(directory), "--compare", "driver", "--metric", "goodput_bps",
                     "--metric", "retry_drops", "--spread")
    assert result.returncode == 0, result.stderr
    assert "min / median / max over seeds" in result.stdout
    assert "0.501 / 0.502 / 0.503" in result.stdout and "0.492 / 0.494 / 0.496" in result.stdout
    assert "10 / 20 / 30" in result.stdout
    tests = (directory / "report" / "ttests.csv").read_text().splitlines()
    header = tests[0].split(",")
    rows = [dict(zip(header, line.split(","))) for line in tests[1:]]
    goodput = {(row["a"], row["b"]): row for row in rows if row["metric"] == "flows.f.goodput_bps"}
    assert set(goodput) == {("lab", "ns2"), ("lab", "sim"), ("ns2", "sim")}
    # sim - lab = 1000 * seed - 10000 over 6 pairs: -8000 on average.
    assert float(goodput[("lab", "sim")]["mean_difference"]) == pytest.approx(8000)
    summary = (directory / "report" / "summary.csv").read_text().splitlines()
    assert summary[0] == "n,driver,metric,runs,mean,ci_low,ci_high,stdev,min,median,max"
    assert [line.split(",")[:2] for line in summary[1:] if "goodput" in line] == [
        ["2", "lab"], ["2", "ns2"], ["2", "sim"], ["4", "lab"], ["4", "ns2"], ["4", "sim"]]
