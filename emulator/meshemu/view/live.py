"""The live source: a lab that is up, asked for a snapshot a few times a
second through its control socket, turned into frames for every page."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

from .. import queueing
from ..choices import ROUTING_KINDS
from ..errors import MeshemuError
from ..lab import Lab
from .frames import FrameMaker, Snapshot
from .ranges import radio_ranges

# Frames per second: the page must move at least twice a second.
RATE_HZ = 4.0
# The counters files the daemons of a node rewrite every second, in its
# directory `run_dir/nodes/<node>/` (choices.ROUTING_KINDS, queueing.py).
DAEMON_COUNTERS = {**{kind.daemon: kind.counters for kind in ROUTING_KINDS.values()
                      if kind.daemon is not None and kind.counters is not None},
                   "bpd": queueing.COUNTERS}


class LiveSource:
    def __init__(self, lab: Lab):
        self.lab = lab
        self.names = list(lab.nodes)
        self.maker = FrameMaker(self.names)
        self.meta = {"lab": lab.name,
                     "nodes": [{"name": node.name, "ip": node.ip} for node in lab],
                     "ranges": radio_ranges(lab.config)}
        self.latest: dict[str, Any] | None = None
        self._listeners: set[asyncio.Queue[dict[str, Any]]] = set()

    def listen(self) -> asyncio.Queue[dict[str, Any]]:
        """A queue of the frames to come (the newest replaces one not yet
        taken: a slow page skips frames, it never falls behind)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1)
        self._listeners.add(queue)
        return queue

    def forget(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self._listeners.discard(queue)

    async def run(self) -> None:
        """Poll until cancelled; a failure (the lab went down) is a frame
        with `error`, and polling goes on."""
        loop = asyncio.get_running_loop()
        period = 1 / RATE_HZ
        while True:
            started = loop.time()
            try:
                frame = self.maker.frame(await asyncio.to_thread(self.snapshot))
            except MeshemuError as exc:
                frame = {"error": str(exc)}
            self.latest = frame
            for queue in self._listeners:
                if queue.full():
                    queue.get_nowait()
                queue.put_nowait(frame)
            await asyncio.sleep(max(period - (loop.time() - started), 0.0))

    def snapshot(self) -> Snapshot:
        stats = self.lab.control("stats", peers=True)
        positions = self.lab.control("positions")
        links = self.lab.control("links")
        return Snapshot(stats["time_ns"], positions["nodes"], stats["nodes"], links["links"])

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
        wrote them: {program: counters}."""
        if node not in self.lab.nodes:
            raise MeshemuError(f"lab {self.lab.name!r} has no node {node!r}")
        found = {}
        for program, file_name in DAEMON_COUNTERS.items():
            try:
                found[program] = json.loads((self.lab.run_dir / "nodes" / node / file_name).read_text())
            except (FileNotFoundError, ValueError):
                continue
        return found
