"""ns-2 movement traces (the output of CMU `setdest`, BonnMotion's ns-2 export).

Understood lines:
    $node_(3) set X_ 150.0            (also Y_, Z_: the initial position)
    $ns_ at 30.5 "$node_(3) setdest 200.0 80.0 12.5"
    $god_ ...  /  $ns_ at T "$god_ ..."   (ns-2 bookkeeping: ignored)
    # comments and blank lines
Node i of the trace is the i-th node of the topology (0-based).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import limits, units
from .errors import ConfigError, Problem
from .source import read_user_file

_NUMBER = r"([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)"
_SET = re.compile(rf"^\$node_\((\d+)\)\s+set\s+([XYZ])_\s+{_NUMBER}$")
_SETDEST = re.compile(rf'^\$ns_\s+at\s+{_NUMBER}\s+"\$node_\((\d+)\)\s+setdest\s+{_NUMBER}\s+{_NUMBER}\s+{_NUMBER}"$')
_GOD = re.compile(r'^(\$god_\s.*|\$ns_\s+at\s+\S+\s+"\$god_\s.*")$')


@dataclass(frozen=True)
class TraceMove:
    line: int
    at_ns: int
    target: tuple[float, float]
    speed_mps: float


@dataclass
class TraceNode:
    """What the trace says about one node."""

    first_line: int
    initial: dict[str, float] = field(default_factory=dict)  # "X"/"Y"/"Z" -> metres
    moves: list[TraceMove] = field(default_factory=list)


def parse_trace(text: str, name: str) -> dict[int, TraceNode]:
    """Parse a trace; every bad line is reported as `name:LINE:COL`."""
    nodes: dict[int, TraceNode] = {}
    problems: list[Problem] = []

    def bad(line_number: int, message: str) -> None:
        problems.append(Problem(name, line_number, 1, "", message))

    for line_number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or _GOD.match(line):
            continue
        try:
            if match := _SET.match(line):
                index, axis, value = int(match[1]), match[2], _metres(match[3])
                node = nodes.setdefault(index, TraceNode(line_number))
                node.initial[axis] = value
            elif match := _SETDEST.match(line):
                at_ns, index = _nanoseconds(match[1]), int(match[2])
                x, y, speed = _metres(match[3]), _metres(match[4]), units.SPEED.within_limit(float(match[5]), match[5])
                if speed <= 0:
                    raise ValueError(f"speed must be positive, got {match[5]}")
                node = nodes.setdefault(index, TraceNode(line_number))
                node.moves.append(TraceMove(line_number, at_ns, (x, y), speed))
            else:
                shown = line if len(line) <= 60 else line[:57] + "..."
                bad(line_number, f"bad ns-2 trace line {shown!r}: expected '$node_(i) set X_ x' or "
                                 "'$ns_ at t \"$node_(i) setdest x y speed\"'")
        except ValueError as exc:
            bad(line_number, f"bad ns-2 trace line: {exc}")
    if problems:
        raise ConfigError(problems)
    for node in nodes.values():
        node.moves.sort(key=lambda move: move.at_ns)  # stable: equal times keep file order
    return nodes


def _metres(text: str) -> float:
    """A coordinate of the trace (metres), finite and within meshemu's limits."""
    metres = float(text)
    if not math.isfinite(metres):
        raise ValueError(f"coordinate {text} is not finite")
    return units.LENGTH.within_limit(metres, text)


def _nanoseconds(text: str) -> int:
    """A time of the trace (seconds) in ns, not negative, within meshemu's limits."""
    seconds = float(text)
    if seconds < 0:
        raise ValueError(f"negative time {text}")
    if not math.isfinite(seconds):
        raise ValueError(f"time {text} is not finite")
    return round(units.TIME.within_limit(seconds * 1e9, text))


def load_trace(path: Path, shown_name: str) -> dict[int, TraceNode]:
    return parse_trace(read_user_file(path, shown_name, limits.MAX_TRACE_BYTES), shown_name)
