"""The flows a view shows: which they are, their paths over time (when a
path last changed) and their goodput, delay and loss over time.

Flows come from an experiment run (the runner writes them into the lab's
directory, RUN_FLOWS_FILE, so a live view of a run's lab finds them) or
from the user (`meshemu view --flow SRC:DST`). Goodput, delay and loss
come from the run's tool outputs as they are written, one sample per
second (model time, s):

- meshemu-udp flows: the receiver's interval reports (received bytes,
  mean one-way delay, packets lost among those due);
- TCP flows: the sender's tcp_info samples (bytes acknowledged, smoothed
  RTT as the delay, bytes retransmitted over bytes sent as the loss);
- tfrc flows: the sender's trace, the last feedback of each second (the
  receive rate the receiver reported, TFRC's RTT as the delay, its loss
  event rate as the loss); the same feedback is tfrc's counters.

iperf3 reports only when it ends: its UDP flows have a path but no samples.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import MeshemuError
from ..experiment.metrics import data_socket
from .routes import NodePath

# In a lab's directory while a run uses it: {"artefacts": DIR, "flows": [...]}.
RUN_FLOWS_FILE = "view-flows.json"
SAMPLE_S = 1.0
STALE_S = 3 * SAMPLE_S


@dataclass(frozen=True)
class ViewFlow:
    name: str
    src: str
    dst: str
    kind: str = "named"     # tcp, udp, tfrc, or named by the user
    tool: str | None = None  # udp: meshemu-udp or iperf3
    port: int | None = None
    start_s: float = 0.0     # from the run's time 0

    def meta(self) -> dict[str, Any]:
        return {"name": self.name, "src": self.src, "dst": self.dst, "kind": self.kind}


def named_flows(specs: list[str], nodes: list[str]) -> list[ViewFlow]:
    """`--flow SRC:DST` arguments → flows; an unknown node is an error."""
    flows = []
    for spec in specs:
        src, sep, dst = spec.partition(":")
        if not sep or not src or not dst:
            raise MeshemuError(f"--flow {spec!r}: expected SRC:DST, two node names")
        for node in (src, dst):
            if node not in nodes:
                raise MeshemuError(f"--flow {spec!r}: the lab has no node {node!r}")
        if src == dst:
            raise MeshemuError(f"--flow {spec!r}: source and destination are the same node")
        flows.append(ViewFlow(f"{src}→{dst}", src, dst))
    return flows


def run_flows(run_flows: list[Any]) -> list[ViewFlow]:
    """An experiment run's traffic flows (commands have no destination)."""
    return [ViewFlow(flow.name, flow.src, flow.dst, flow.kind, flow.options.get("tool"), flow.port,
                     flow.start_ns / 1e9)
            for flow in run_flows if flow.dst is not None and flow.src is not None]


def write_run_flows(lab_dir: Path, artefacts: Path, flows: list[ViewFlow]) -> None:
    (lab_dir / RUN_FLOWS_FILE).write_text(json.dumps({"artefacts": str(artefacts),
                                                      "flows": [asdict(flow) for flow in flows]}))


def read_run_flows(lab_dir: Path) -> tuple[Path | None, list[ViewFlow]]:
    """The flows of the run using the lab (none for a plain lab)."""
    path = lab_dir / RUN_FLOWS_FILE
    try:
        found = json.loads(path.read_text())
        return Path(found["artefacts"]), [ViewFlow(**flow) for flow in found["flows"]]
    except FileNotFoundError:
        return None, []
    except (ValueError, KeyError, TypeError) as exc:
        raise MeshemuError(f"{path}: not the flows of a run ({exc})") from None


class PathTracker:
    """The frame's `flows` rows: each flow's path by node index, whether it
    reaches the destination, and the time its path last changed."""

    def __init__(self, flows: list[ViewFlow], index: dict[str, int]):
        self.flows = flows
        self.index = index
        self._last: list[NodePath | None] = [None] * len(flows)
        self._since: list[float] = [0.0] * len(flows)

    def rows(self, t: float, paths: list[NodePath]) -> list[list[Any]]:
        rows = []
        for k, path in enumerate(paths):
            if path != self._last[k]:
                self._last[k], self._since[k] = path, t
            rows.append([[self.index[node] for node in path.nodes], path.reached, self._since[k]])
        return rows


class ToolOutputs:
    """The JSON-lines outputs of a run's tools, as far as they are written:
    each read goes on from where the last one ended, so the live view does
    not parse a long run's files again every second. Not shared between
    threads."""

    def __init__(self, artefacts: Path):
        self.artefacts = artefacts
        self._rows: dict[str, list[dict[str, Any]]] = {}
        self._read_up_to: dict[str, int] = {}

    def rows(self, name: str) -> list[dict[str, Any]]:
        """The objects of the file's complete lines (one still being written
        waits for its end)."""
        rows = self._rows.setdefault(name, [])
        offset = self._read_up_to.get(name, 0)
        try:
            with (self.artefacts / name).open("rb") as file:
                file.seek(offset)
                written = file.read()
        except FileNotFoundError:
            return rows
        complete = written[:written.rfind(b"\n") + 1]
        self._read_up_to[name] = offset + len(complete)
        for line in complete.splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict):
                rows.append(row)
        return rows


def samples(flow: ViewFlow, outputs: ToolOutputs, clock: dict[str, int]) -> list[list[float | None]]:
    """[[t, goodput bps, delay ms, loss fraction], ...] of the flow so far,
    t in model seconds at the end of each sample (`clock`: the run's
    clock.json)."""
    t0_ns = clock["model_t0_wall_ns"]
    if flow.kind == "udp" and flow.tool == "meshemu-udp":
        return _udp_samples(outputs.rows(f"{flow.name}.recv.jsonl"), t0_ns)
    if flow.kind == "tcp":
        return _tcp_samples(outputs.rows(f"{flow.name}.tcpinfo.jsonl"), flow.port, t0_ns)
    if flow.kind == "tfrc":
        # The trace's times count from the sender's start, the flow's start.
        offset_s = (clock["run_t0_wall_ns"] - t0_ns) / 1e9 + flow.start_s
        return _tfrc_samples(tfrc_feedback(flow, outputs), offset_s)
    return []


def tfrc_feedback(flow: ViewFlow, outputs: ToolOutputs) -> list[dict[str, Any]]:
    """The feedback lines of a tfrc sender's trace, as written so far."""
    return [row for row in outputs.rows(f"{flow.name}.trace.jsonl") if row.get("event") == "feedback"]


def _udp_samples(rows: list[dict[str, Any]], t0_ns: int) -> list[list[float | None]]:
    found = []
    for row in rows:
        if row.get("type") != "interval":
            continue
        due = row["packets"] + max(row["lost"], 0)
        found.append([round((row["time_ns"] - t0_ns) / 1e9, 3), row["bytes"] * 8 / SAMPLE_S,
                      None if row["mean_delay_ns"] is None else round(row["mean_delay_ns"] / 1e6, 2),
                      round(max(row["lost"], 0) / due, 4) if due else None])
    return found


def _tcp_samples(rows: list[dict[str, Any]], port: int | None, t0_ns: int) -> list[list[float | None]]:
    """One sample per SAMPLE_S of the connection that carried the data."""
    connection = data_socket(rows, port) if port is not None else []
    if not connection:
        return []
    found = []
    before = connection[0]
    for row in connection[1:]:
        elapsed_ns = row["time_ns"] - before["time_ns"]
        if elapsed_ns < SAMPLE_S * 1e9:
            continue
        sent = row["bytes_sent"] - before["bytes_sent"]
        found.append([round((row["time_ns"] - t0_ns) / 1e9, 3),
                      (row["bytes_acked"] - before["bytes_acked"]) * 8e9 / elapsed_ns,
                      round(row["srtt_us"] / 1e3, 2),
                      round((row["bytes_retrans"] - before["bytes_retrans"]) / sent, 4) if sent else None])
        before = row
    return found


def _tfrc_samples(feedback: list[dict[str, Any]], offset_s: float) -> list[list[float | None]]:
    by_second: dict[int, dict[str, Any]] = {}
    for row in feedback:
        by_second[int(row["t"] // SAMPLE_S)] = row  # the last of each second
    return [[round(offset_s + (second + 1) * SAMPLE_S, 3), row["x_recv_bps"], round(row["rtt_ms"], 2),
             round(row["p"], 4)] for second, row in sorted(by_second.items())]


def latest(found: list[list[float | None]], t: float) -> list[float | None]:
    """goodput, delay and loss of the newest sample at or before t: None
    before the first; after 3 s without one nothing arrived (goodput 0,
    delay and loss unknown)."""
    for sample in reversed(found):
        if sample[0] <= t:
            return sample[1:] if t - sample[0] <= STALE_S else [0.0, None, None]
    return [None, None, None]
