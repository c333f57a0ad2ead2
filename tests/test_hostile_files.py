"""Hostile files: alias bombs, huge or deeply nested documents, huge sweeps,
absurd values, bytes that are no text, devices, FIFOs and directories. Each
is refused with FILE[:LINE:COL] and a reason before the work it would cause,
and nothing is read that is not a regular file (meshemu/limits.py).

The loaders' work is bounded by the limits, so each refusal takes well
under a second here (emulator/README.md, RELIABILITY); the bound asserted
is wider, to catch a return of the unbounded work (the alias bomb alone ran
for more than 20 s) without failing on a loaded machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meshemu import limits
from meshemu.bench.validate import alias_bomb
from meshemu.errors import ConfigError
from meshemu.experiment.plan import plan_experiment
from meshemu.ns2trace import load_trace
from meshemu.simfile import load_sim
from meshemu.source import load_yaml, parse_yaml
from meshemu.topology import load_topology

BOUND_S = 5.0
TOPOLOGY = "name: vt\ngenerate: {kind: chain, n: 3, spacing: 200m}\n"
EXPERIMENT = """\
topology: {generate: {kind: chain, n: 3, spacing: 200m}}
duration: 10s
traffic:
  - {kind: udp, src: n0, dst: n2, rate: 100kbps, packet: 500B}
"""


def refused(load, *args):
    """The one problem `load(*args)` refuses with, checked to come fast."""
    started = time.perf_counter()
    with pytest.raises(ConfigError) as caught:
        load(*args)
    assert time.perf_counter() - started < BOUND_S
    return caught.value.problems


# --- YAML structure ----------------------------------------------------------------------

def test_an_alias_bomb_is_refused_at_the_value_past_the_limit(write):
    file = write("bomb.yaml", alias_bomb())
    [problem] = refused(load_yaml, file)
    assert problem.file == str(file) and problem.line >= 1 and problem.column > 0
    assert f"more than {limits.MAX_VALUES} values once aliases are expanded" in problem.message


def test_aliases_in_a_real_study_are_fine(write):
    document = load_yaml(write("ok.yaml", "a: &a {x: 1, y: [1, 2]}\nb: [*a, *a]\nc: {<<: *a, x: 2}\n"))
    assert document.data == {"a": {"x": 1, "y": [1, 2]}, "b": [{"x": 1, "y": [1, 2]}] * 2, "c": {"x": 2, "y": [1, 2]}}


@pytest.mark.parametrize("text", ["a: " + "[" * 100_000 + "]" * 100_000, "a: " + "{b: " * 5000 + "1" + "}" * 5000,
                                  "".join(f"{'  ' * depth}k{depth}:\n" for depth in range(200)) + "  " * 200 + "v\n"],
                         ids=["flow lists", "flow mappings", "block mappings"])
def test_deep_nesting_is_refused_where_it_gets_too_deep(write, text):
    [problem] = refused(load_yaml, write("deep.yaml", text))
    assert problem.line >= 1 and problem.column >= 1
    assert f"nested more than {limits.MAX_DEPTH} deep" in problem.message


def test_a_recursive_alias_is_refused(write):
    [problem] = refused(load_yaml, write("loop.yaml", "a: &a [1, *a]\n"))
    assert "nested more than" in problem.message and "recursive alias" in problem.message


def test_a_document_of_too_many_values_is_refused_while_it_is_read(write):
    [problem] = refused(load_yaml, write("many.yaml", "a: [" + ", ".join(["1"] * 50_000) + "]\n"))
    assert problem.line == 1 and problem.column > 1
    assert f"more than {limits.MAX_YAML_NODES} values and keys" in problem.message


def test_a_topology_of_the_most_nodes_written_one_by_one_loads(write):
    nodes = "".join(f"  n{i}: {{position: [{i % 40 * 100}m, {i // 40 * 100}m], radio: {{tx_power: 20dBm}}}}\n"
                    for i in range(limits.MAX_NODES))
    text = "name: vt\nsubnet: 10.0.0.0/16\nnodes:\n" + nodes
    assert len(text) < limits.MAX_FILE_BYTES
    assert len(load_topology(write("big.yaml", text)).nodes) == limits.MAX_NODES


def test_a_file_larger_than_the_limit_is_not_read(write):
    file = write("big.yaml", "# padding\n" * (limits.MAX_FILE_BYTES // 10 + 1))
    [problem] = refused(load_yaml, file)
    assert (problem.line, problem.column) == (0, 0)
    assert f"larger than {limits.MAX_FILE_BYTES} bytes" in problem.message


# --- bytes that are no text -----------------------------------------------------------

def test_non_utf8_is_refused_at_the_byte(tmp_path):
    file = tmp_path / "latin1.yaml"
    file.write_bytes("name: vt\ndescription: caf\xe9\n".encode("latin-1"))
    [problem] = refused(load_yaml, file)
    assert (problem.line, problem.column) == (2, 17)
    assert "not UTF-8 text (byte 0xe9)" in problem.message


def test_a_binary_file_is_refused_at_its_first_nul(tmp_path):
    file = tmp_path / "binary.yaml"
    file.write_bytes(b"name: vt\n\x7fELF\x02\x01\x01\x00\x00")
    [problem] = refused(load_yaml, file)
    assert (problem.line, problem.column) == (2, 8)
    assert "a binary file, not text" in problem.message


def test_a_control_character_is_refused_where_it_is(write):
    [problem] = refused(load_yaml, write("bell.yaml", "name: vt\nx: a\x07b\n"))
    assert (problem.line, problem.column) == (2, 5)
    assert "U+0007 is not allowed" in problem.message


# --- what is not a regular file ----------------------------------------------------------

@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_symlink_to_a_device_is_never_read(tmp_path, device):
    link = tmp_path / "topology.yaml"
    link.symlink_to(device)
    [problem] = refused(load_yaml, link)
    assert problem.message == "is not a regular file (a device, FIFO or socket): not read"


def test_a_fifo_is_never_opened(tmp_path):
    """Opening a FIFO to read waits for a writer: a loader that opened it
    would hang here."""
    fifo = tmp_path / "topology.yaml"
    os.mkfifo(fifo)
    [problem] = refused(load_yaml, fifo)
    assert "not a regular file" in problem.message


def test_a_directory_is_refused(tmp_path):
    [problem] = refused(load_yaml, tmp_path)
    assert problem.message == "is a directory, not a file"


def test_files_named_inside_a_file_are_refused_where_they_are_named(tmp_path, write):
    (tmp_path / "zero.ns2").symlink_to("/dev/zero")
    topology = write("t.yaml", TOPOLOGY + "mobility: {model: ns2_trace, file: zero.ns2}\n")
    [problem] = refused(load_topology, topology)
    assert (problem.line, problem.path) == (3, "mobility.file")
    assert problem.message == f"{tmp_path / 'zero.ns2'}: is not a regular file (a device, FIFO or socket): not read"
    (tmp_path / "topo").mkdir()
    experiment = write("e.yaml", EXPERIMENT.replace("topology: {generate: {kind: chain, n: 3, spacing: 200m}}",
                                                    "topology: {file: topo}"))
    [problem] = refused(plan_experiment, load_yaml(experiment))
    assert (problem.line, problem.path) == (1, "topology.file")
    assert problem.message.endswith("topo: is a directory, not a file")


def test_an_ns2_trace_beyond_the_limits(tmp_path):
    trace = tmp_path / "moves.ns2"
    trace.write_text('$node_(0) set X_ 1e9\n$ns_ at 1e12 "$node_(0) setdest 1 2 3"\n'
                     '$ns_ at 1 "$node_(0) setdest 1 2 1e6"\n')
    problems = refused(load_trace, trace, "moves.ns2")
    assert [(problem.line, problem.message) for problem in problems] == [
        (1, "bad ns-2 trace line: '1e9' is out of range: a length is at most 1000km (meshemu/limits.py)"),
        (2, "bad ns-2 trace line: '1e12' is out of range: a time is at most 86400s (meshemu/limits.py)"),
        (3, "bad ns-2 trace line: '1e6' is out of range: a speed is at most 1000m/s (meshemu/limits.py)")]


# --- absurd values ------------------------------------------------------------------------

ABSURD_TOPOLOGIES = {
    "a million nodes": ("name: vt\ngenerate: {kind: chain, n: 1000000, spacing: 1m}\n", "generate.n",
                        f"less than or equal to {limits.MAX_NODES}"),
    "a grid of a million": ("name: vt\ngenerate: {kind: grid, rows: 1000, cols: 1000, spacing: 1m}\n", "generate",
                            "1000 x 1000 are 1000000 nodes, more than the 1000 of a topology"),
    "too many nodes of their own": (TOPOLOGY.replace("n: 3", "n: 1000") + "nodes:\n  extra: {position: [0m, 5m]}\n",
                                    "nodes", "1001 nodes, more than the 1000 of a topology"),
    "too many draws": ("name: vt\narea: {min: [0m, 0m], max: [1km, 1km]}\n"
                       "generate: {kind: random, n: 1000, max_attempts: 5000}\n", "generate",
                       "max_attempts: 5000 draws of 1000 nodes are more than a placement may make"),
    "NaN": (TOPOLOGY + "radio: {propagation: {model: log_distance, exponent: .nan, reference_distance: 1m}}\n",
            "radio.propagation.exponent", "input should be a finite number"),
    "infinity": (TOPOLOGY + "radio: {slot: 1e999us}\n", "radio.slot", "not a finite number"),
    "a coordinate at infinity": (TOPOLOGY + "nodes:\n  far: {position: [.inf, 0]}\n", "nodes.far.position",
                                 "a coordinate must be a finite number"),
    "a coordinate beyond the limit": (TOPOLOGY + "nodes:\n  far: {position: [1e12, 0]}\n", "nodes.far.position",
                                      "out of range: a length is at most 1000km"),
    "a huge rate": (TOPOLOGY + "radio: {data_rate: 1e15Gbps}\n", "radio.data_rate",
                    "out of range: a rate is at most 100Gbps"),
    "a huge power": (TOPOLOGY + "radio: {tx_power: 1e30W}\n", "radio.tx_power", "out of range: a power is at most"),
    "a time beyond a day": (TOPOLOGY + "mobility: {model: random_waypoint, speed: [1m/s, 2m/s], pause: 1e9s}\n"
                            "area: {min: [0m, 0m], max: [500m, 500m]}\n", "mobility.pause",
                            "out of range: a time is at most 86400s"),
}


@pytest.mark.parametrize("case", list(ABSURD_TOPOLOGIES))
def test_absurd_topology_values(write, case):
    text, path, fragment = ABSURD_TOPOLOGIES[case]
    problems = refused(load_topology, write("t.yaml", text))
    assert any(problem.path == path and fragment in problem.message and problem.line > 0 for problem in problems), \
        problems


ABSURD_EXPERIMENTS = {
    "zero duration": ("duration: 10s", "duration: 0s", "duration", "must be positive"),
    "negative duration": ("duration: 10s", "duration: -10s", "duration", "must be positive"),
    "a duration beyond a day": ("duration: 10s", "duration: 1e7s", "duration", "a time is at most 86400s"),
    "a huge rate": ("rate: 100kbps", "rate: 1e20Mbps", "traffic[0].rate", "a rate is at most 100Gbps"),
    "NaN rate": ("rate: 100kbps", "rate: .nan", "traffic[0].rate", "missing unit"),
    "too many repetitions": ("duration: 10s", "duration: 10s\nrepetitions: 100000000", "repetitions",
                             f"less than or equal to {limits.MAX_SEEDS}"),
}


@pytest.mark.parametrize("case", list(ABSURD_EXPERIMENTS))
def test_absurd_experiment_values(write, case):
    old, new, path, fragment = ABSURD_EXPERIMENTS[case]
    problems = refused(plan_experiment, load_yaml(write("e.yaml", EXPERIMENT.replace(old, new))))
    assert any(problem.path == path and fragment in problem.message for problem in problems), problems


def test_a_sweep_of_millions_of_runs_is_refused_before_it_is_expanded(write):
    def hundred(values):
        return "[" + ", ".join(values) + "]"

    text = EXPERIMENT + "repetitions: 100\nsweep:\n" \
        f"  traffic.0.rate: {hundred(f'{rate}kbps' for rate in range(1, 101))}\n" \
        f"  traffic.0.packet: {hundred(f'{size}B' for size in range(100, 200))}\n" \
        f"  traffic.0.port: {hundred(str(port) for port in range(2000, 2100))}\n"
    [problem] = refused(plan_experiment, load_yaml(write("sweep.yaml", text)))
    assert (problem.line, problem.path) == (7, "sweep")
    assert problem.message.startswith(f"1000000 sweep points x 100 seeds are 100000000 runs, more than the "
                                      f"{limits.MAX_RUNS}")


def test_a_sweep_that_sets_many_seeds_counts_them(write):
    text = EXPERIMENT + "sweep:\n  variant:\n" + "".join(
        f"    v{case}: {{repetitions: 10000, traffic.0.port: {2000 + case}}}\n" for case in range(11))
    [problem] = refused(plan_experiment, load_yaml(write("seeds.yaml", text)))
    assert problem.message.startswith("11 sweep points x 10000 seeds are 110000 runs")


def test_a_sim_file_sweep_is_bounded_too(write):
    values = "[" + ", ".join(f"{size}B" for size in range(100, 1100)) + "]"
    text = ("topology: {generate: {kind: chain, n: 2, spacing: 100m}}\nduration: 1s\nrepetitions: 1000\n"
            "flows: [{src: n0, dst: n1, traffic: saturated, packet: 500B}]\nsweep:\n  flows.0.packet: " + values + "\n")
    [problem] = refused(load_sim, write("sim.yaml", text))
    assert problem.path == "sweep" and "1000 sweep points x 1000 seeds are 1000000 runs" in problem.message


# --- the command line ------------------------------------------------------------------------

def test_meshemu_validate_reports_each_hostile_file_in_one_line(tmp_path, write):
    bomb = write("bomb.yaml", alias_bomb())
    device = tmp_path / "zero.yaml"
    device.symlink_to("/dev/zero")
    result = subprocess.run([sys.executable, "-m", "meshemu", "validate", str(bomb), str(device), str(tmp_path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 3, result.stderr
    assert lines[0].startswith(f"{bomb}:") and "values once aliases are expanded" in lines[0]
    assert lines[1] == f"{device}: is not a regular file (a device, FIFO or socket): not read"
    assert lines[2] == f"{tmp_path}: is a directory, not a file"


def test_parse_yaml_refuses_an_alias_bomb_given_as_text():
    """--set VALUE is YAML too."""
    [problem] = refused(parse_yaml, alias_bomb(), "--set x")
    assert problem.file == "--set x"
