"""A run's recording for `meshemu view RESULTS --run ID`: what the page
needs, in the run's directory (RECORD_FILE, gzip'd JSON lines):

    {"meta": the view's meta (nodes, ranges, flows)}
    one frame per `measure.view` interval (frames.py's format, with each
    flow's path: [path, reached, since] as live.py's `flows` rows)
    {"samples": [[[t, goodput bps, delay ms, loss], ...] per flow]}

The frames are written while the run goes (a thread polls the lab as the
live view does); the samples, from the tools' outputs, once they ended.
The file is two gzip members, which gzip readers read as one. replay.py
holds every line to this format (its `_Frame` and the rest).
"""

from __future__ import annotations

import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import MeshemuError
from ..lab import Lab
from .flows import PathTracker, ToolOutputs, ViewFlow, samples
from .frames import FrameMaker
from .live import lab_meta, snapshot
from .routes import RouteReader

RECORD_FILE = "view.jsonl.gz"


def _line(value: dict[str, Any]) -> str:
    return json.dumps(value, separators=(",", ":")) + "\n"


class Recorder:
    def __init__(self, lab: Lab, flows: list[ViewFlow], path: Path, interval_s: float):
        self.lab = lab
        self.flows = flows
        self.path = path
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._record, name="view-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _record(self) -> None:
        maker = FrameMaker(list(self.lab.nodes))
        reader = RouteReader(self.lab)
        tracker = PathTracker(self.flows, maker.index)
        pairs = [(flow.src, flow.dst) for flow in self.flows]
        meta = lab_meta(self.lab, self.flows)  # here, not in the runner's schedule: the ranges take a moment
        with gzip.open(self.path, "wt") as out:
            out.write(_line({"meta": meta}))
            due = time.monotonic()
            while not self._stop.is_set():
                try:
                    frame = maker.frame(snapshot(self.lab))
                except MeshemuError:  # the lab went away: the recording ends there
                    return
                frame["flows"] = tracker.rows(frame["t"], reader.paths(pairs))
                out.write(_line(frame))
                due += self.interval_s
                self._stop.wait(max(due - time.monotonic(), 0.0))

    def add_samples(self, artefacts: Path, clock: dict[str, int]) -> None:
        """The flows' samples from their tools' outputs (after they ended);
        `clock`: the run's clock.json."""
        outputs = ToolOutputs(artefacts)
        found = [samples(flow, outputs, clock) for flow in self.flows]
        with gzip.open(self.path, "at") as out:
            out.write(_line({"samples": found}))
