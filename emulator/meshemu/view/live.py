"""The live source: a lab that is up, asked for a snapshot a few times a
second through its control socket, turned into frames for every page, with
the flows along their routes; and the actions on the lab (move a node,
start and stop an air capture)."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

from .. import queueing
from ..choices import ROUTING_KINDS
from ..errors import MeshemuError
from ..lab import Lab
from .flows import PathTracker, ToolOutputs, ViewFlow, latest, read_run_flows, samples, tfrc_feedback
from .frames import FrameMaker, Snapshot
from .ranges import radio_ranges
from .routes import RouteReader
from .source import FrameSource

# Frames per second: the page must move at least twice a second.
RATE_HZ = 4.0
# Routes and flow samples are read once a second: a path change shows
# within a second, and reading routes costs one `ip` per node on a path.
FLOWS_EVERY = 4
# The counters files the daemons of a node rewrite every second, in its
# directory `run_dir/nodes/<node>/` (choices.ROUTING_KINDS, queueing.py).
DAEMON_COUNTERS = {**{kind.daemon: kind.counters for kind in ROUTING_KINDS.values()
                      if kind.daemon is not None and kind.counters is not None},
                   "bpd": queueing.COUNTERS}


def lab_meta(lab: Lab, flows: list[ViewFlow]) -> dict[str, Any]:
    """What the page needs once, live or replayed: the nodes, their radio
    ranges (they take the model a moment), the flows."""
    return {"lab": lab.name, "nodes": [{"name": node.name, "ip": node.ip} for node in lab],
            "ranges": radio_ranges(lab.config), "flows": [flow.meta() for flow in flows]}


def snapshot(lab: Lab) -> Snapshot:
    stats = lab.control("stats", peers=True)
    positions = lab.control("positions")
    links = lab.control("links")
    return Snapshot(stats["time_ns"], positions["nodes"], stats["nodes"], links["links"])


def new_capture_file(directory: Path, lab_name: str) -> Path:
    """air-LAB-YYYYmmdd-HHMMSS.pcap in the directory, with -2, -3... when a
    capture of the same second is there (the medium would truncate it)."""
    stem = f"air-{lab_name}-{time.strftime('%Y%m%d-%H%M%S')}"
    path, count = directory / f"{stem}.pcap", 1
    while path.exists():
        count += 1
        path = directory / f"{stem}-{count}.pcap"
    return path.resolve()


class FlowFrames:
    """The `flows` part of frames: paths from the routing tables and, for a
    run's flows, their newest samples."""

    def __init__(self, lab: Lab, flows: list[ViewFlow], artefacts: Path | None):
        """`artefacts`: the run's directory (None for flows named with --flow)."""
        self.flows = flows
        # Frames are made in a worker thread, counters read in the server's: a reader each.
        self._for_frames = ToolOutputs(artefacts) if artefacts else None
        self._for_counters = ToolOutputs(artefacts) if artefacts else None
        self.reader = RouteReader(lab)
        self.tracker = PathTracker(flows, {name: i for i, name in enumerate(lab.nodes)})
        self._clock: dict[str, int] | None = None

    def rows(self, t: float) -> list[list[Any]]:
        paths = self.reader.paths([(flow.src, flow.dst) for flow in self.flows])
        rows = self.tracker.rows(t, paths)
        for flow, row in zip(self.flows, rows):
            row += latest(self._samples(flow), t)
        return rows

    def _samples(self, flow: ViewFlow) -> list[list[float | None]]:
        if self._for_frames is None:
            return []
        if self._clock is None:
            try:  # written by the runner before its receivers start
                self._clock = json.loads((self._for_frames.artefacts / "clock.json").read_text())
            except FileNotFoundError:
                return []
        return samples(flow, self._for_frames, self._clock)

    def tfrc_counters(self, node: str) -> dict[str, Any]:
        """The last feedback of each tfrc flow the node sends: {tfrc FLOW:
        counters}."""
        found: dict[str, Any] = {}
        if self._for_counters is None:
            return found
        for flow in self.flows:
            if flow.kind == "tfrc" and flow.src == node:
                feedback = tfrc_feedback(flow, self._for_counters)
                if feedback:
                    found[f"tfrc {flow.name}"] = {k: v for k, v in feedback[-1].items() if k != "event"}
        return found


class LiveSource(FrameSource):
    def __init__(self, lab: Lab, flows: list[ViewFlow], capture_dir: Path):
        # Flows named with --flow replace a run's; they have no tool outputs.
        artefacts, shown = (None, flows) if flows else read_run_flows(lab.run_dir)
        self.flow_frames = FlowFrames(lab, shown, artefacts)
        super().__init__({**lab_meta(lab, shown), "capture": True})
        self.lab = lab
        self.maker = FrameMaker(list(lab.nodes))
        self.capture_dir = capture_dir
        self.capturing: Path | None = None

    async def run(self) -> None:
        """Poll until cancelled; a failure (the lab went down) is a frame
        with `error`, and polling goes on."""
        loop = asyncio.get_running_loop()
        period = 1 / RATE_HZ
        flows: list[list[Any]] = []
        count = 0
        while True:
            started = loop.time()
            try:
                frame = self.maker.frame(await asyncio.to_thread(snapshot, self.lab))
                if count % FLOWS_EVERY == 0 and self.flow_frames.flows:
                    flows = await asyncio.to_thread(self.flow_frames.rows, frame["t"])
                frame["flows"] = flows
                frame["capture"] = None if self.capturing is None else str(self.capturing)
            except MeshemuError as exc:
                frame = {"error": str(exc)}
            count += 1
            self.publish(frame)
            await asyncio.sleep(max(period - (loop.time() - started), 0.0))

    def move(self, node: str, x: float, y: float) -> list[float]:
        """`meshemu move NODE X Y`: the node keeps its height."""
        if node not in self.lab.nodes:
            raise MeshemuError(f"lab {self.lab.name!r} has no node {node!r}")
        if not (math.isfinite(x) and math.isfinite(y)):
            raise MeshemuError(f"position of {node} must be finite numbers, got {x!r}, {y!r}")
        self.lab.move(node, x, y)
        return self.lab.positions()[node]

    def daemons(self, node: str) -> dict[str, Any]:
        """The counters of the daemons that run in the node, as they last
        wrote them, and of the tfrc senders of a run: {program: counters}."""
        if node not in self.lab.nodes:
            raise MeshemuError(f"lab {self.lab.name!r} has no node {node!r}")
        found = {}
        for program, file_name in DAEMON_COUNTERS.items():
            try:
                found[program] = json.loads((self.lab.run_dir / "nodes" / node / file_name).read_text())
            except (FileNotFoundError, ValueError):
                continue
        return {**found, **self.flow_frames.tfrc_counters(node)}

    def capture(self, run: bool) -> Path | None:
        """Start (into a new file of the capture directory: a page never
        names a path) or stop the air capture, as `meshemu capture
        start FILE | stop`; the file."""
        if run:
            path = new_capture_file(self.capture_dir, self.lab.name)
            self.lab.capture(path, run=True)
            self.capturing = path
            return path
        path, self.capturing = self.capturing, None
        self.lab.capture(None, run=False)
        return path
