"""The replay source: a recorded run (record.py) played back in model time,
with the same frames as the live source. The page's slider and play
button set the cursor (`seek`); every frame says where the cursor is."""

from __future__ import annotations

import asyncio
import bisect
import gzip
import json
import zlib
from pathlib import Path
from typing import Any

from ..errors import MeshemuError
from .flows import latest
from .live import RATE_HZ
from .record import RECORD_FILE
from .source import FrameSource


def recording_of(results: Path, run_id: str) -> Path:
    """The recording of run `run_id` in an experiment's results directory;
    a clear error when there is none."""
    if not (results / "runs.jsonl").is_file():
        raise MeshemuError(f"{results}: not an experiment's results directory (no runs.jsonl)")
    run_dir = results / "runs" / run_id
    if not run_dir.is_dir():
        raise MeshemuError(f"{results}: no run {run_id!r} (runs/{run_id}/ is missing)")
    path = run_dir / RECORD_FILE
    if not path.is_file():
        raise MeshemuError(f"run {run_id} was not recorded for the view: run it with `measure: {{view: 500ms}}`")
    return path


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[list[list[Any]]]]:
    """(meta, frames, samples per flow) of a recording."""
    meta: dict[str, Any] | None = None
    frames: list[dict[str, Any]] = []
    found: list[list[list[Any]]] = []
    try:
        with gzip.open(path, "rt") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    row = json.loads(line)
                except ValueError:
                    raise MeshemuError(f"{path}: line {number} is not JSON") from None
                if "meta" in row:
                    meta = row["meta"]
                elif "samples" in row:
                    found = row["samples"]
                else:
                    frames.append(row)
    except (OSError, EOFError, zlib.error) as exc:
        raise MeshemuError(f"{path}: not a readable recording ({exc})") from None
    if meta is None or not frames:
        raise MeshemuError(f"{path}: the recording has no meta line or no frame")
    return meta, frames, found


class ReplaySource(FrameSource):
    def __init__(self, path: Path, name: str):
        meta, frames, found = load(path)
        for frame in frames:  # each flow's samples as the live source gives them
            for k, row in enumerate(frame.get("flows", [])):
                row += latest(found[k] if k < len(found) else [], frame["t"])
        self.frames = frames
        self.times = [frame["t"] for frame in frames]
        super().__init__({**meta, "lab": name, "capture": False,
                          "replay": {"start": self.times[0], "end": self.times[-1]}})
        self.cursor = self.times[0]
        self.playing = False
        self._changed = asyncio.Event()

    def seek(self, t: float | None, playing: bool | None) -> dict[str, Any]:
        """Move the cursor (clamped to the recording) and/or play or pause."""
        if t is not None:
            self.cursor = min(max(t, self.times[0]), self.times[-1])
        if playing is not None:
            if playing and self.cursor >= self.times[-1]:
                self.cursor = self.times[0]  # play again from the start
            self.playing = playing
        self._changed.set()
        return {"t": self.cursor, "playing": self.playing}

    def frame_at(self, t: float) -> dict[str, Any]:
        """The newest recorded frame at or before t."""
        return self.frames[max(bisect.bisect_right(self.times, t) - 1, 0)]

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        period = 1 / RATE_HZ
        last = loop.time()
        shown = None
        while True:
            now = loop.time()
            if self.playing:
                self.cursor = min(self.cursor + (now - last), self.times[-1])
                self.playing = self.cursor < self.times[-1]
            last = now
            replay = {"t": round(self.cursor, 3), "playing": self.playing}
            if replay != shown:  # paused: nothing new to send
                self.publish({**self.frame_at(self.cursor), "replay": replay})
                shown = replay
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), period)
            except asyncio.TimeoutError:
                pass
