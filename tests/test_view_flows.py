"""The view's flows without a lab (no root): paths through routing tables
as `ip -j route show` prints them, route changes, flow samples from the
tools' outputs, and a recording played back."""

from __future__ import annotations

import asyncio
import gzip
import json

import pytest

from meshemu.errors import MeshemuError
from meshemu.view.flows import (RUN_FLOWS_FILE, PathTracker, ToolOutputs, ViewFlow, latest, named_flows,
                                 read_run_flows, samples, write_run_flows)
from meshemu.view.replay import ReplaySource, load, recording_of
from meshemu.view.routes import NodePath, parse_table, trace

IPS = {f"10.0.0.{i + 1}": f"n{i}" for i in range(5)}
SUBNET = {"dst": "10.0.0.0/16", "dev": "wlan0", "protocol": "kernel", "scope": "link", "prefsrc": "10.0.0.1"}
CATCH_ALL = {**SUBNET, "flow": {"to": "654"}}  # aodvd's: the realm `ip -j` writes as flow.to


def host(dst: str, gateway: str | None = None) -> dict:
    return {"dst": dst, "dev": "wlan0", "protocol": "173", "scope": "link" if gateway is None else "global",
            **({"gateway": gateway} if gateway else {})}


def tables(rows: dict[str, list[dict]]):
    parsed = {node: parse_table(routes) for node, routes in rows.items()}
    return lambda node: parsed.get(node, [])


def test_a_path_follows_host_routes_hop_by_hop_to_the_destination():
    table_of = tables({"n0": [CATCH_ALL, host("10.0.0.4", "10.0.0.2")],
                       "n1": [CATCH_ALL, host("10.0.0.4", "10.0.0.3")],
                       "n2": [CATCH_ALL, host("10.0.0.4")]})
    assert trace("n0", "n3", "10.0.0.4", table_of, IPS) == NodePath(("n0", "n1", "n2", "n3"), True)


def test_static_routing_the_connected_subnet_delivers_directly():
    table_of = tables({"n0": [SUBNET, host("10.0.0.3", "10.0.0.2")], "n1": [SUBNET]})
    assert trace("n0", "n2", "10.0.0.3", table_of, IPS) == NodePath(("n0", "n1", "n2"), True)


def test_a_path_stops_at_the_catch_all_of_an_on_demand_daemon():
    table_of = tables({"n0": [CATCH_ALL, host("10.0.0.4", "10.0.0.2")], "n1": [CATCH_ALL]})
    assert trace("n0", "n3", "10.0.0.4", table_of, IPS) == NodePath(("n0", "n1"), False)


def test_a_path_stops_before_a_loop_and_at_an_unreachable_route():
    table_of = tables({"n0": [host("10.0.0.4", "10.0.0.2")], "n1": [host("10.0.0.4", "10.0.0.1")]})
    assert trace("n0", "n3", "10.0.0.4", table_of, IPS) == NodePath(("n0", "n1"), False)
    table_of = tables({"n0": [SUBNET, {"type": "unreachable", "dst": "10.0.0.4"}]})
    assert trace("n0", "n3", "10.0.0.4", table_of, IPS) == NodePath(("n0",), False)


def test_the_longest_prefix_wins():
    table = parse_table([{"dst": "default", "gateway": "10.0.0.5"}, SUBNET, host("10.0.0.4", "10.0.0.2")])
    assert [str(route.network) for route in table] == ["10.0.0.4/32", "10.0.0.0/16", "0.0.0.0/0"]


def test_a_path_keeps_the_time_of_its_last_change():
    tracker = PathTracker([ViewFlow("f", "n0", "n2")], {f"n{i}": i for i in range(5)})
    straight, detour = NodePath(("n0", "n1", "n2"), True), NodePath(("n0", "n3", "n2"), True)
    assert tracker.rows(1.0, [straight]) == [[[0, 1, 2], True, 1.0]]
    assert tracker.rows(2.0, [straight]) == [[[0, 1, 2], True, 1.0]]
    assert tracker.rows(3.0, [detour]) == [[[0, 3, 2], True, 3.0]]


def test_named_flows_are_checked_against_the_lab():
    assert named_flows(["n0:n4"], ["n0", "n4"]) == [ViewFlow("n0→n4", "n0", "n4")]
    for spec, problem in (("n0", "expected SRC:DST"), ("n0:n9", "no node 'n9'"), ("n0:n0", "the same node")):
        with pytest.raises(MeshemuError, match=problem):
            named_flows([spec], ["n0", "n4"])


def test_a_runs_flows_are_read_back_and_a_broken_file_is_named(tmp_path):
    flows = [ViewFlow("u", "n0", "n2", "udp", "meshemu-udp", 5001, 1.0), ViewFlow("t", "n2", "n0", "tcp", None, 5201)]
    write_run_flows(tmp_path, tmp_path / "run", flows)
    assert read_run_flows(tmp_path) == (tmp_path / "run", flows)
    assert read_run_flows(tmp_path / "plain-lab") == (None, [])
    (tmp_path / RUN_FLOWS_FILE).write_text('{"artefacts": "/x", "flows": [{"name": "u"}]}')
    with pytest.raises(MeshemuError, match=f"^{tmp_path / RUN_FLOWS_FILE}: not the flows of a run"):
        read_run_flows(tmp_path)


def test_udp_samples_from_the_receivers_interval_reports(tmp_path):
    t0 = 1_000_000_000_000
    rows = [{"type": "interval", "t_s": 1.0, "time_ns": t0 + 3_000_000_000, "src": "10.0.0.1:1", "flow_id": 5001,
             "packets": 90, "bytes": 90_000, "lost": 10, "mean_delay_ns": 12_500_000.0, "jitter_ns": 0.0},
            {"type": "interval", "t_s": 2.0, "time_ns": t0 + 4_000_000_000, "src": "10.0.0.1:1", "flow_id": 5001,
             "packets": 0, "bytes": 0, "lost": 0, "mean_delay_ns": None, "jitter_ns": 0.0}]
    text = "".join(json.dumps(row) + "\n" for row in rows)
    (tmp_path / "u.recv.jsonl").write_text(text + '{"type": "interval", "t_s"')  # a line still being written
    found = samples(ViewFlow("u", "n0", "n2", "udp", "meshemu-udp", 5001), ToolOutputs(tmp_path),
                    {"model_t0_wall_ns": t0})
    assert found == [[3.0, 720_000.0, 12.5, 0.1], [4.0, 0.0, None, None]]
    assert latest(found, 3.5) == [720_000.0, 12.5, 0.1]
    assert latest(found, 2.0) == [None, None, None]
    assert latest(found, 9.0) == [0.0, None, None]  # nothing arrived since


def test_tool_outputs_are_read_on_from_where_the_last_read_ended(tmp_path):
    outputs, path = ToolOutputs(tmp_path), tmp_path / "x.jsonl"
    assert outputs.rows("x.jsonl") == []  # not written yet
    path.write_text('{"k": 1}\nnot json\n[2]\n{"k": 3}\n{"k": ')  # a broken line, a list, a line being written
    assert outputs.rows("x.jsonl") == [{"k": 1}, {"k": 3}]
    with path.open("a") as file:
        file.write('4}\n{"k": 5}\n')
    assert outputs.rows("x.jsonl") == [{"k": 1}, {"k": 3}, {"k": 4}, {"k": 5}]
    assert outputs.rows("x.jsonl") == [{"k": 1}, {"k": 3}, {"k": 4}, {"k": 5}]


def test_tcp_samples_from_the_senders_tcp_info(tmp_path):
    t0 = 0
    rows = [{"time_ns": k * 500_000_000, "src": "10.0.0.1", "sport": 40000, "dst": "10.0.0.3", "dport": 5201,
             "bytes_acked": k * 50_000, "bytes_sent": k * 55_000, "bytes_retrans": k * 5_000, "srtt_us": 30_000}
            for k in range(5)]
    (tmp_path / "t.tcpinfo.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    found = samples(ViewFlow("t", "n0", "n2", "tcp", None, 5201), ToolOutputs(tmp_path), {"model_t0_wall_ns": t0})
    assert found == [[1.0, 800_000.0, 30.0, 0.0909], [2.0, 800_000.0, 30.0, 0.0909]]


def test_tfrc_samples_from_the_senders_feedback_trace(tmp_path):
    rows = [{"t": 0.4, "event": "feedback", "rtt_sample_ms": 20.0, "rtt_ms": 21.0, "p": 0.0, "x_recv_bps": 1e5,
             "x_bps": 2e5, "rate_bps": 2e5, "slow_start": True, "data_limited": False},
            {"t": 0.45, "event": "nofeedback", "x_bps": 1e5, "rate_bps": 1e5},
            {"t": 0.9, "event": "feedback", "rtt_sample_ms": 30.0, "rtt_ms": 25.0, "p": 0.01, "x_recv_bps": 3e5,
             "x_bps": 4e5, "rate_bps": 4e5, "slow_start": False, "data_limited": False},
            {"t": 1.2, "event": "feedback", "rtt_sample_ms": 30.0, "rtt_ms": 26.0, "p": 0.02, "x_recv_bps": 5e5,
             "x_bps": 4e5, "rate_bps": 4e5, "slow_start": False, "data_limited": False}]
    (tmp_path / "f.trace.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    # The run's time 0 is 2 s of model time, the flow starts 1 s later.
    clock = {"model_t0_wall_ns": 10_000_000_000, "run_t0_wall_ns": 12_000_000_000}
    found = samples(ViewFlow("f", "n0", "n2", "tfrc", None, 5001, 1.0), ToolOutputs(tmp_path), clock)
    assert found == [[4.0, 3e5, 25.0, 0.01], [5.0, 5e5, 26.0, 0.02]]


META = {"lab": "x", "nodes": [{"name": "n0", "ip": "10.0.0.1"}, {"name": "n1", "ip": "10.0.0.2"}],
        "ranges": [{"rx_m": 250.0, "cs_m": 550.0, "rx_threshold_dbm": -64.4}] * 2,
        "flows": [{"name": "f", "src": "n0", "dst": "n1", "kind": "udp"}]}


def recorded_frame(t: float) -> dict:
    return {"t": t, "pos": [[0, 0], [100 + t, 0]], "air": [[0.5, 1, 0, 0, 0, 0]] * 2,
            "links": [[0, 1, 1.0, -60.0, True]], "flows": [[[0, 1], True, 0.0]]}


def write_recording(path, lines, flow_samples=None):
    with gzip.open(path, "wt") as out:
        out.writelines(json.dumps(line) + "\n" for line in lines)
    if flow_samples is not None:
        with gzip.open(path, "at") as out:  # the runner appends the samples as a second member
            out.write(json.dumps({"samples": flow_samples}) + "\n")


def test_a_recording_plays_back_with_its_flows_samples(tmp_path):
    path = tmp_path / "view.jsonl.gz"
    write_recording(path, [{"meta": META}, *(recorded_frame(t) for t in (0.0, 0.5, 1.0, 1.5))],
                    [[[1.0, 8000.0, 3.0, 0.0]]])
    meta, loaded, found = load(path)
    assert meta["flows"][0]["name"] == "f" and len(loaded) == 4 and found == [[[1.0, 8000.0, 3.0, 0.0]]]

    async def play():
        source = ReplaySource(path, "exp run r")
        assert source.meta["replay"] == {"start": 0.0, "end": 1.5}
        assert source.frame_at(0.7)["pos"][1] == [100.5, 0]
        assert source.frame_at(1.2)["flows"][0] == [[0, 1], True, 0.0, 8000.0, 3.0, 0.0]
        assert source.seek(9.0, None) == {"t": 1.5, "playing": False}
        assert source.seek(None, True) == {"t": 0.0, "playing": True}  # play again from the start
        queue = source.listen()
        task = asyncio.create_task(source.run())
        first = await queue.get()
        await asyncio.sleep(0.6)
        later = await queue.get()
        task.cancel()
        assert first["replay"]["playing"] and later["replay"]["t"] > first["replay"]["t"]

    asyncio.run(play())


FRAME = recorded_frame(1.0)


@pytest.mark.parametrize("lines, line, problem", [
    ([{"meta": META}, [FRAME]], 2, "a line must be a JSON object"),
    ([{"meta": META}, {**FRAME, "t": "1.0"}], 2, "t: Input should be a valid number"),
    ([{"meta": META}, {**FRAME, "pos": [[0, 0]]}], 2, "1 positions and 2 air rows for 2 nodes"),
    ([{"meta": META}, {**FRAME, "air": [[0.5, 1]] * 2}], 2, "air.0: List should have at least 6 items"),
    ([{"meta": META}, {**FRAME, "links": [[0, 2, 1.0, -60.0, True]]}], 2, "a link names a node index beyond"),
    ([{"meta": META}, {**FRAME, "flows": []}], 2, "paths of 0 flows for 1"),
    ([{"meta": META}, {**FRAME, "flows": [[[0, 5], True, 0.0]]}], 2, "a flow's path names a node index beyond"),
    ([{"meta": META}, {**FRAME, "capture": "/x"}], 2, "capture: Extra inputs are not permitted"),
    ([{"meta": META}, FRAME, recorded_frame(0.5)], 3, "t goes back from 1.0 to 0.5"),
    ([FRAME], 1, "does not start with its meta line"),
    ([{"meta": {**META, "nodes": "n0 n1"}}], 1, "meta.nodes: Input should be a valid array"),
    ([{"meta": META}, {"meta": META}], 2, "a second meta line"),
    ([{"meta": META}, FRAME, {"samples": []}], 3, "samples of 0 flows for 1"),
])
def test_a_malformed_recording_is_refused_with_its_line(tmp_path, lines, line, problem):
    path = tmp_path / "view.jsonl.gz"
    write_recording(path, lines)
    with pytest.raises(MeshemuError) as refused:
        load(path)
    assert str(refused.value).startswith(f"{path}:{line}: ") and problem in str(refused.value)


def test_a_recording_cut_short_or_not_json_is_refused_with_its_line(tmp_path):
    path = tmp_path / "view.jsonl.gz"
    with gzip.open(path, "wb") as out:
        out.write(json.dumps({"meta": META}).encode() + b"\n" + b'{"t": 1.0, "pos"\n')
    with pytest.raises(MeshemuError, match=f"^{path}:2: Invalid JSON"):
        load(path)
    with gzip.open(path, "wb") as out:
        out.write(json.dumps({"meta": META}).encode() + b"\n\xff\xfe\n")
    with pytest.raises(MeshemuError, match=f"^{path}:2: Invalid JSON"):
        load(path)


def test_a_replay_names_what_is_missing(tmp_path):
    with pytest.raises(MeshemuError, match="not an experiment's results directory"):
        recording_of(tmp_path, "abc")
    (tmp_path / "runs.jsonl").write_text("")
    with pytest.raises(MeshemuError, match="no run 'abc'"):
        recording_of(tmp_path, "abc")
    (tmp_path / "runs" / "abc").mkdir(parents=True)
    with pytest.raises(MeshemuError, match="measure: {view: 500ms}"):
        recording_of(tmp_path, "abc")
    (tmp_path / "broken.gz").write_bytes(b"not gzip")
    with pytest.raises(MeshemuError, match="not a readable recording"):
        load(tmp_path / "broken.gz")
