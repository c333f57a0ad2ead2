"""Sim files: expansion into runs, located errors, the runner and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from meshemu.errors import ConfigError
from meshemu.simfile import load_sim, run_plan

SIM = """\
description: test sim
topology:
  generate: {kind: chain, n: 3, spacing: 200m}
duration: 10s
warmup: 1s
seeds: [1, 2]
flows:
  - {src: all, dst: n0, traffic: saturated, packet: 1460B}
  - {src: first, dst: last, traffic: cbr, rate: 64kbps, packet: 512B, start: 2s, stop: 8s}
  - {src: n1, dst: broadcast, traffic: poisson, rate: 10KB/s, packet: 100B}
sweep:
  topology.generate.n: [2, 4]
  topology.radio.rts_threshold: [3000B, 0B]
"""


def test_sweep_times_seeds_and_flow_expansion(write):
    plan = load_sim(write("s.yaml", SIM))
    assert plan.sweep_paths == ["topology.generate.n", "topology.radio.rts_threshold"]
    assert [(run.params["topology.generate.n"], run.params["topology.radio.rts_threshold"], run.seed)
            for run in plan.runs] == [(2, "3000B", 1), (2, "3000B", 2), (2, "0B", 1), (2, "0B", 2),
                                      (4, "3000B", 1), (4, "3000B", 2), (4, "0B", 1), (4, "0B", 2)]
    run = plan.runs[-1]
    scenario = run.scenario
    assert scenario["duration_ns"] == 10_000_000_000 and scenario["warmup_ns"] == 1_000_000_000
    assert scenario["routing"] == "static" and scenario["trace"] is False
    assert scenario["medium"]["seed"] == 2
    assert len(scenario["medium"]["nodes"]) == 4
    assert {node["radio"]["rts_threshold_bytes"] for node in scenario["medium"]["nodes"]} == {0}
    assert scenario["flows"] == [
        {"name": "f0", "src": 1, "dst": 0, "packet_bytes": 1460, "traffic": {"kind": "saturated"},
         "start_ns": 0, "stop_ns": None},
        {"name": "f1", "src": 2, "dst": 0, "packet_bytes": 1460, "traffic": {"kind": "saturated"},
         "start_ns": 0, "stop_ns": None},
        {"name": "f2", "src": 3, "dst": 0, "packet_bytes": 1460, "traffic": {"kind": "saturated"},
         "start_ns": 0, "stop_ns": None},
        {"name": "f3", "src": 0, "dst": 3, "packet_bytes": 512, "traffic": {"kind": "cbr", "rate_bps": 64000},
         "start_ns": 2_000_000_000, "stop_ns": 8_000_000_000},
        {"name": "f4", "src": 1, "dst": "broadcast", "packet_bytes": 100,
         "traffic": {"kind": "poisson", "rate_bps": 80000}, "start_ns": 0, "stop_ns": None},
    ]


def test_a_bad_sweep_value_is_reported_at_the_sweep(write):
    file = write("s.yaml", SIM.replace("[3000B, 0B]", "[3000B, 0X]"))
    with pytest.raises(ConfigError) as caught:
        load_sim(file)
    [problem] = caught.value.problems
    assert (problem.line, problem.column) == (13, 41)
    assert problem.path == "sweep.topology.radio.rts_threshold[1]"
    assert "unknown unit 'X' for a size" in problem.message


def test_a_sweep_into_a_missing_key_is_an_unknown_key(write):
    file = write("s.yaml", SIM.replace("topology.generate.n:", "topology.generate.count:"))
    with pytest.raises(ConfigError) as caught:
        load_sim(file)
    assert {(p.line, p.path, p.message) for p in caught.value.problems} == {
        (12, "sweep.topology.generate.count[0]", "unknown key 'count'"),
        (12, "sweep.topology.generate.count[1]", "unknown key 'count'")}


def test_topology_from_a_file_keeps_its_own_locations(write):
    topology = write("topologies/t.yaml", "generate: {kind: chain, n: 3, spacing: 200}\n")
    file = write("sims/s.yaml", "topology: {file: ../topologies/t.yaml}\nduration: 5s\n"
                                "flows: [{src: n0, dst: n2, traffic: saturated, packet: 1000B}]\n")
    with pytest.raises(ConfigError) as caught:
        load_sim(file)
    [problem] = caught.value.problems
    assert (problem.file, problem.line, problem.path) == (str(file.parent / "../topologies/t.yaml"), 1,
                                                          "topology.generate.spacing")
    assert topology.exists()


def test_a_sweep_over_a_topology_file(write):
    write("t.yaml", "generate: {kind: chain, n: 3, spacing: 200m}\n")
    plan = load_sim(write("s.yaml", "topology: {file: t.yaml}\nduration: 5s\nseed: 9\n"
                                    "flows: [{src: n0, dst: last, traffic: saturated, packet: 1000B}]\n"
                                    "sweep: {topology.generate.spacing: [100m, 150m]}\n"))
    assert [run.scenario["medium"]["nodes"][2]["position"][0] for run in plan.runs] == [200.0, 300.0]
    assert {run.seed for run in plan.runs} == {9}


@pytest.mark.parametrize("flow, line_fragment", [
    ("{src: n0, dst: n9, traffic: saturated, packet: 1000B}", "flows[0].dst: unknown node 'n9'"),
    ("{src: n0, dst: n0, traffic: saturated, packet: 1000B}", "flows[0]: src and dst are the same node (n0)"),
    ("{src: n0, dst: n1, traffic: cbr, packet: 1000B}", "flows[0]: cbr traffic needs a rate"),
    ("{src: n0, dst: n1, traffic: saturated, rate: 1Mbps, packet: 1000B}", "flows[0]: a saturated flow has no rate"),
    ("{src: n0, dst: n1, traffic: saturated, packet: 3000B}", "larger than the 802.11 maximum of 2304 B"),
    ("{src: n0, dst: n1, traffic: saturated, packet: 1000B, start: 5s, stop: 1s}", "stop must be after start"),
    ("{src: n0, dst: n1, traffic: bursty, packet: 1000B}", "flows[0].traffic: input should be 'saturated'"),
])
def test_flow_mistakes(write, flow, line_fragment):
    file = write("s.yaml", f"topology: {{generate: {{kind: chain, n: 2, spacing: 200m}}}}\nduration: 5s\n"
                           f"flows:\n  - {flow}\n")
    with pytest.raises(ConfigError) as caught:
        load_sim(file)
    text = str(caught.value)
    assert line_fragment in text
    assert text.startswith(f"{file}:4:")


def test_warmup_must_be_shorter_than_duration(write):
    file = write("s.yaml", "topology: {generate: {kind: chain, n: 2, spacing: 200m}}\nduration: 5s\nwarmup: 5s\n"
                           "flows: [{src: n0, dst: n1, traffic: saturated, packet: 1000B}]\n")
    with pytest.raises(ConfigError, match="warmup must be shorter than duration"):
        load_sim(file)


def test_runner_keeps_plan_order_and_reports_failures(write):
    from meshemu.errors import MediumError

    plan = load_sim(write("s.yaml", SIM))

    def simulate(scenario):
        if len(scenario["medium"]["nodes"]) == 4 and scenario["medium"]["seed"] == 2:
            raise MediumError("boom")
        return {"seed": scenario["medium"]["seed"], "nodes_seen": len(scenario["medium"]["nodes"])}

    results = run_plan(plan, jobs=3, simulate=simulate)
    assert [result.run for result in results] == plan.runs
    assert [result.error for result in results] == [None] * 5 + ["boom", None, "boom"]
    first = results[0].as_json()
    assert first == {"seed": 1, "nodes_seen": 2, "params": {"topology.generate.n": 2,
                                                            "topology.radio.rts_threshold": "3000B"}}


def test_cli_dry_run_prints_each_scenario(write):
    file = write("s.yaml", SIM)
    result = subprocess.run([sys.executable, "-m", "meshemu", "sim", str(file), "--dry-run"],
                            capture_output=True, text=True, check=True)
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 8
    assert lines[3]["params"] == {"topology.generate.n": 2, "topology.radio.rts_threshold": "0B"}
    assert lines[3]["scenario"] == load_sim(file).runs[3].scenario


def test_cli_validate(write):
    good = write("s.yaml", SIM)
    bad = write("b.yaml", SIM.replace("duration: 10s", "duration: 10"))
    result = subprocess.run([sys.executable, "-m", "meshemu", "validate", str(good), str(bad)],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert f"{good}: ok (sim file, 8 runs)" in result.stdout
    assert result.stderr.startswith(f"{bad}:4:11: duration: missing unit")
    assert "Traceback" not in result.stderr


def test_cli_sim_runs_the_medium(write):
    """Two nodes, one saturated flow: throughput is positive and below the
    2 Mbit/s PHY rate (every frame pays DIFS, backoff, RTS/CTS/ACK)."""
    file = write("s.yaml", "topology: {generate: {kind: chain, n: 2, spacing: 200m}}\nduration: 5s\nwarmup: 1s\n"
                           "seeds: [1, 2]\nflows: [{src: n0, dst: n1, traffic: saturated, packet: 1460B}]\n")
    result = subprocess.run([sys.executable, "-m", "meshemu", "sim", str(file), "--json"], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    runs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [run["seed"] for run in runs] == [1, 2] and all(run["params"] == {} for run in runs)
    for run in runs:
        flows = run["flows"] if isinstance(run["flows"], list) else list(run["flows"].values())
        assert 0.5e6 < flows[0]["throughput_bps"] < 2e6
        assert flows[0]["delivered"] <= flows[0]["generated"]
    table = subprocess.run([sys.executable, "-m", "meshemu", "sim", str(file)], capture_output=True, text=True)
    assert table.returncode == 0 and "delivered/generated" in table.stdout


def test_sweep_paths_that_cannot_be_set(write):
    file = write("s.yaml", "topology: {generate: {kind: chain, n: 2, spacing: 200m}}\nduration: 5s\n"
                           "flows: [{src: n0, dst: n1, traffic: cbr, rate: 1Mbps, packet: 1000B}]\n"
                           "sweep:\n  flows.0.rate: [1Mbps, 2Mbps]\n  flows.3.rate: [1Mbps]\n  duration.x: [1]\n")
    with pytest.raises(ConfigError) as caught:
        load_sim(file)
    assert [(p.line, p.path, p.message) for p in caught.value.problems] == [
        (6, "sweep.flows.3.rate", "flows[3] is not an element of a list in this file"),
        (7, "sweep.duration.x", "duration is not a mapping"),
    ]


def test_a_sweep_into_a_list_element(write):
    plan = load_sim(write("s.yaml", "topology: {generate: {kind: chain, n: 2, spacing: 200m}}\nduration: 5s\n"
                                    "flows: [{src: n0, dst: n1, traffic: cbr, rate: 1Mbps, packet: 1000B}]\n"
                                    "sweep: {flows.0.rate: [1Mbps, 2Mbps]}\n"))
    assert [run.scenario["flows"][0]["traffic"]["rate_bps"] for run in plan.runs] == [1_000_000, 2_000_000]


@pytest.mark.parametrize("routing", ["none", "aodv", "{babeld: {hello_interval: 1s}}"])
def test_routing_other_than_static_is_refused_at_its_line(write, routing):
    text = SIM.replace("  generate: {kind: chain, n: 3, spacing: 200m}\n",
                       f"  generate: {{kind: chain, n: 3, spacing: 200m}}\n  routing: {routing}\n")
    with pytest.raises(ConfigError) as caught:
        load_sim(write("s.yaml", text))
    message = str(caught.value)
    assert "s.yaml:4:" in message and "topology.routing" in message and "meshemu run" in message
