"""The replay source: a recorded run (record.py) played back in model time,
with the same frames as the live source. The page's slider and play
button set the cursor (`seek`); every frame says where the cursor is."""

from __future__ import annotations

import asyncio
import bisect
import gzip
import zlib
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Discriminator, Field, FiniteFloat, NonNegativeInt, Tag, TypeAdapter, \
    ValidationError, with_config
from typing_extensions import TypedDict

from ..errors import MeshemuError
from .flows import latest
from .frames import AIR_FIELDS
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


# What a recording's lines must be (record.py's docstring): anything else is
# refused with its line, before a page could stumble over it.
_EXACTLY = ConfigDict(extra="forbid", strict=True)


@with_config(_EXACTLY)
class _Node(TypedDict):
    name: str
    ip: str


@with_config(_EXACTLY)
class _Ranges(TypedDict):
    rx_m: FiniteFloat | None
    cs_m: FiniteFloat | None
    rx_threshold_dbm: FiniteFloat


@with_config(_EXACTLY)
class _Flow(TypedDict):
    name: str
    src: str
    dst: str
    kind: str


@with_config(_EXACTLY)
class _Meta(TypedDict):
    lab: str
    nodes: list[_Node]
    ranges: list[_Ranges]
    flows: list[_Flow]


@with_config(_EXACTLY)
class _MetaLine(TypedDict):
    meta: _Meta


# A link: [a, b, delivery ratio or null, signal dBm, both ways].
_Link = tuple[NonNegativeInt, NonNegativeInt, FiniteFloat | None, FiniteFloat, bool]
# A flow's path as recorded: [node indices, reaches the destination, since].
_FlowPath = tuple[list[NonNegativeInt], bool, FiniteFloat]


@with_config(_EXACTLY)
class _Frame(TypedDict):
    t: FiniteFloat
    pos: list[Annotated[list[FiniteFloat], Field(min_length=2, max_length=2)]]
    air: list[Annotated[list[FiniteFloat], Field(min_length=len(AIR_FIELDS), max_length=len(AIR_FIELDS))]]
    links: list[_Link]
    flows: list[_FlowPath]


@with_config(_EXACTLY)
class _SamplesLine(TypedDict):
    samples: list[list[tuple[FiniteFloat, FiniteFloat | None, FiniteFloat | None, FiniteFloat | None]]]


def _kind(line: Any) -> str | None:
    if not isinstance(line, dict):
        return None
    return "meta" if "meta" in line else "samples" if "samples" in line else "frame"


_LINE = TypeAdapter(Annotated[
    Annotated[_MetaLine, Tag("meta")] | Annotated[_SamplesLine, Tag("samples")] | Annotated[_Frame, Tag("frame")],
    Discriminator(_kind, custom_error_type="not_an_object", custom_error_message="a line must be a JSON object")])


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[list[list[Any]]]]:
    """(meta, frames, samples per flow) of a recording; a malformed one is a
    MeshemuError naming the file and the line."""
    meta: dict[str, Any] | None = None
    frames: list[dict[str, Any]] = []
    found: list[list[list[Any]]] = []
    try:
        with gzip.open(path, "rb") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    row = _LINE.validate_json(line)
                except ValidationError as exc:
                    raise MeshemuError(f"{path}:{number}: {_first_problem(exc)}") from None
                problem = _misplaced(row, number, meta, frames)
                if problem:
                    raise MeshemuError(f"{path}:{number}: {problem}")
                if "meta" in row:
                    meta = row["meta"]
                elif "samples" in row:
                    found = [[list(sample) for sample in flow] for flow in row["samples"]]
                else:
                    frames.append(row)
    except (OSError, EOFError, zlib.error) as exc:
        raise MeshemuError(f"{path}: not a readable recording ({exc})") from None
    if meta is None or not frames:
        raise MeshemuError(f"{path}: the recording has no meta line or no frame")
    return meta, frames, found or [[] for _ in meta["flows"]]


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"][1:])  # [0]: the kind of line, _kind's tag
    more = f" (and {exc.error_count() - 1} more problems)" if exc.error_count() > 1 else ""
    return f"{where + ': ' if where else ''}{error['msg']}{more}"


def _misplaced(row: dict[str, Any], number: int, meta: dict[str, Any] | None,
               frames: list[dict[str, Any]]) -> str | None:
    """What makes a well-formed line unfit where it stands (the meta first
    and once, frames in time order, as many nodes and flows as the meta
    names), or None."""
    if "meta" in row:
        if number != 1:
            return "a second meta line (the meta is line 1, once)"
        nodes, ranges = len(row["meta"]["nodes"]), len(row["meta"]["ranges"])
        return f"{ranges} ranges for {nodes} nodes" if ranges != nodes else None
    if meta is None:
        return "the recording does not start with its meta line"
    flows = len(meta["flows"])
    if "samples" in row:
        return f"samples of {len(row['samples'])} flows for {flows}" if len(row["samples"]) != flows else None
    return _frame_problem(row, frames[-1]["t"] if frames else None, len(meta["nodes"]), flows)


def _frame_problem(frame: dict[str, Any], previous_t: float | None, nodes: int, flows: int) -> str | None:
    if previous_t is not None and frame["t"] < previous_t:
        return f"t goes back from {previous_t} to {frame['t']}"
    if len(frame["pos"]) != nodes or len(frame["air"]) != nodes:
        return f"{len(frame['pos'])} positions and {len(frame['air'])} air rows for {nodes} nodes"
    if any(max(a, b) >= nodes for a, b, *_ in frame["links"]):
        return f"a link names a node index beyond the {nodes} nodes"
    if len(frame["flows"]) != flows:
        return f"paths of {len(frame['flows'])} flows for {flows}"
    if any(index >= nodes for path, _, _ in frame["flows"] for index in path):
        return f"a flow's path names a node index beyond the {nodes} nodes"
    return None


class ReplaySource(FrameSource):
    def __init__(self, path: Path, name: str):
        meta, frames, found = load(path)
        for frame in frames:  # each flow's samples as the live source gives them
            frame["flows"] = [[*row, *latest(found[k], frame["t"])] for k, row in enumerate(frame["flows"])]
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
