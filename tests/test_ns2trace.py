"""ns-2 movement traces."""

import pytest

from meshemu.errors import ConfigError
from meshemu.ns2trace import parse_trace
from meshemu.topology import load_topology

TRACE = """\
#
# nodes: 2, pause: 0.00, max speed: 20.00, max x: 1500.00, max y: 300.00
#
$node_(0) set X_ 150.5
$node_(0) set Y_ 93.0
$node_(0) set Z_ 0.000000000000
$node_(1) set X_ 10.0
$node_(1) set Y_ 20.0
$god_ set-dist 0 1 16777215
$ns_ at 30.0 "$node_(0) setdest 1200.0 250.0 12.5"
$ns_ at 2.5 "$node_(0) setdest 400.0 200.0 3.0"
$ns_ at 30.0 "$god_ set-dist 0 1 2"
$ns_ at 1e1 "$node_(1) setdest 15 25 1"
"""


def test_parse_positions_and_moves_in_time_order():
    nodes = parse_trace(TRACE, "moves.ns2")
    assert nodes[0].initial == {"X": 150.5, "Y": 93.0, "Z": 0.0}
    assert [(m.at_ns, m.target, m.speed_mps, m.line) for m in nodes[0].moves] == [
        (2_500_000_000, (400.0, 200.0), 3.0, 11), (30_000_000_000, (1200.0, 250.0), 12.5, 10)]
    assert [(m.at_ns, m.target) for m in nodes[1].moves] == [(10_000_000_000, (15.0, 25.0))]


@pytest.mark.parametrize("line, fragment", [
    ("$node_(0) set W_ 1.0", "bad ns-2 trace line '$node_(0) set W_ 1.0'"),
    ('$ns_ at 3.0 "$node_(0) setdest 1 2"', "bad ns-2 trace line"),
    ('$ns_ at -1 "$node_(0) setdest 1 2 3"', "negative time -1"),
    ('$ns_ at 1 "$node_(0) setdest 1 2 0"', "speed must be positive, got 0"),
    ("set X_ 1", "bad ns-2 trace line"),
])
def test_bad_lines_name_file_and_line(line, fragment):
    with pytest.raises(ConfigError) as caught:
        parse_trace("$node_(0) set X_ 1\n\n" + line + "\n", "moves.ns2")
    [problem] = caught.value.problems
    assert (problem.file, problem.line) == ("moves.ns2", 3)
    assert fragment in problem.message
    assert str(problem).startswith("moves.ns2:3:1: bad ns-2 trace line")


def test_every_bad_line_is_reported():
    with pytest.raises(ConfigError) as caught:
        parse_trace("junk\n$node_(0) set X_ 1\nmore junk\n", "t")
    assert [p.line for p in caught.value.problems] == [1, 3]


def test_topology_with_a_trace(write):
    write("moves.ns2", TRACE)
    topology = load_topology(write("t.yaml", """\
area: {min: [0m, 0m], max: [1500m, 300m]}
generate: {kind: chain, n: 3, spacing: 10m}
mobility: {model: ns2_trace, file: moves.ns2}
"""))
    n0, n1, n2 = topology.medium["nodes"]
    assert n0["position"] == [150.5, 93.0, 0.0]
    assert n0["mobility"] == {"kind": "setdest", "moves": [
        {"t_ns": 2_500_000_000, "target": [400.0, 200.0, 0.0], "speed_mps": 3.0},
        {"t_ns": 30_000_000_000, "target": [1200.0, 250.0, 0.0], "speed_mps": 12.5}]}
    assert n1["position"] == [10.0, 20.0, 0.0]
    assert n2["mobility"] == {"kind": "static"} and n2["position"] == [20.0, 0.0, 0.0]


def test_trace_naming_a_node_that_does_not_exist(write):
    trace = write("moves.ns2", "$node_(0) set X_ 1\n$node_(5) set X_ 1\n")
    with pytest.raises(ConfigError) as caught:
        load_topology(write("t.yaml", "generate: {kind: chain, n: 2, spacing: 10m}\n"
                                      "mobility: {model: ns2_trace, file: moves.ns2}\n"))
    [problem] = caught.value.problems
    assert (problem.file, problem.line) == (str(trace), 2)
    assert "node 5 does not exist (the topology has 2 nodes, 0 to 1)" in problem.message


def test_trace_moving_out_of_the_area(write):
    write("moves.ns2", '$ns_ at 1 "$node_(1) setdest 2000 0 5"\n')
    with pytest.raises(ConfigError) as caught:
        load_topology(write("t.yaml", "area: {min: [0m, 0m], max: [100m, 100m]}\n"
                                      "generate: {kind: chain, n: 2, spacing: 10m}\n"
                                      "mobility: {model: ns2_trace, file: moves.ns2}\n"))
    [problem] = caught.value.problems
    assert "node n1 moves to (2000, 0), outside the area" in problem.message


def test_missing_trace_file(write):
    file = write("t.yaml", "generate: {kind: chain, n: 2, spacing: 10m}\nmobility: {model: ns2_trace, file: nope.ns2}\n")
    with pytest.raises(ConfigError) as caught:
        load_topology(file)
    [problem] = caught.value.problems
    assert (problem.line, problem.path) == (2, "mobility.file")
    assert "no such file" in problem.message
