"""CPU time and wake-ups of processes, from /proc."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class Usage:
    """What /proc says of a set of processes at one moment."""

    cpu_seconds: float
    switches: int


def usage(pids: list[int]) -> Usage:
    """CPU time (the scheduler's, in ns: /proc/PID/stat counts 10 ms ticks)
    and context switches of every thread of `pids`."""
    cpu_ns = 0
    switches = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            cpu_ns += int((task / "schedstat").read_text().split()[0])
            for line in (task / "status").read_text().splitlines():
                if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                    switches += int(line.split()[1])
    return Usage(cpu_ns / 1e9, switches)
