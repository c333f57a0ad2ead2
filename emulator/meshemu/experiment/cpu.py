"""The runner's own CPU over the phases of a lab run (`runner_cpu_s` in its
record): what the control plane costs beside the lab it measures.

Counted: the runner process (every thread: the run's own work and the
progress display) and the helpers it started and has reaped (`ip netns
exec`, `ss`, `sysctl`, the daemons' `--print-rules`), from getrusage. Not
counted: the medium and the daemons in the nodes, which are reaped only when
the lab goes down, after the phases measured. With `--jobs` above 1 the runs
under way share one process: each figure then covers them all.
"""

from __future__ import annotations

import resource

# The phases of a record's `runner_cpu_s`: until time 0 (lab up, node
# settings, receivers started), and from time 0 to the end of the run.
BRING_UP = "bring_up"
RUN = "run"


def cpu_seconds() -> float:
    """CPU of this process and of its reaped children so far (user + system)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


class PhaseClock:
    """CPU seconds of consecutive phases."""

    def __init__(self) -> None:
        self._mark = cpu_seconds()
        self.seconds: dict[str, float] = {}

    def end(self, phase: str) -> None:
        """The phase under way ends now; the next one begins."""
        now = cpu_seconds()
        self.seconds[phase] = round(now - self._mark, 3)
        self._mark = now
