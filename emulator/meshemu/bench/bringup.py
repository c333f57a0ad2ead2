"""Time to bring a lab up and down (needs root and the TAP medium).

    python -m meshemu.bench.bringup [--topology topologies/random100.yaml] [--runs 5] [--settle]

Prints min/median/max of the resolution (validation, placement), `up` (state,
hosts files, the medium's namespaces and TAPs, its ready line) and `down`
(stop, remove) times, and checks that nothing is left after each run.

The kernel destroys a lab's namespaces after `down` has returned (most of a
second of one core for 1000), so a run that follows at once shares the
machine with that. `--settle` waits before each run until the machine is
idle (at least 90 % over a quarter of a second, 30 s at most), as for a lab
brought up on its own, and prints how long it waited.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from ..errors import MeshemuError
from ..lab import Lab
from ..topology import load_topology

DEFAULT_TOPOLOGY = Path(__file__).resolve().parents[3] / "topologies" / "random100.yaml"
IDLE_SHARE = 0.9
IDLE_WINDOW_S = 0.25
SETTLE_LIMIT_S = 30.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshemu.bench.bringup", description=__doc__.splitlines()[0])
    parser.add_argument("--topology", type=Path, default=DEFAULT_TOPOLOGY)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--name", default="benchup", help="lab name used for the runs")
    parser.add_argument("--settle", action="store_true", help="wait for an idle machine before each run")
    args = parser.parse_args(argv)
    timings: dict[str, list[float]] = {"resolve": [], "up": [], "down": []}
    if args.settle:
        timings["settle"] = []
    try:
        for _ in range(args.runs):
            if args.settle:
                timings["settle"].append(settle())
            started = time.perf_counter()
            topology = load_topology(args.topology)
            timings["resolve"].append(time.perf_counter() - started)
            lab = Lab(topology, args.name)
            try:
                started = time.perf_counter()
                lab.up()
                timings["up"].append(time.perf_counter() - started)
                started = time.perf_counter()
                lab.down()
                timings["down"].append(time.perf_counter() - started)
                if lab.run_dir.exists():
                    raise MeshemuError(f"{lab.run_dir} is left after down")
            finally:
                if lab.run_dir.exists():
                    lab.down()
    except MeshemuError as exc:
        print(f"bringup: {exc}", file=sys.stderr)
        return 1
    print(f"{args.topology.name}: {len(topology.nodes)} nodes, {args.runs} runs")
    print(f"{'phase':<8} {'min':>8} {'median':>8} {'max':>8}  (seconds)")
    for phase, values in timings.items():
        print(f"{phase:<8} {min(values):8.3f} {statistics.median(values):8.3f} {max(values):8.3f}")
    return 0


def settle() -> float:
    """Wait until the machine's CPUs were idle for IDLE_SHARE of a window
    (or SETTLE_LIMIT_S passed); the seconds waited."""
    started = time.perf_counter()
    busy, idle = _cpu_times()
    while time.perf_counter() - started < SETTLE_LIMIT_S:
        time.sleep(IDLE_WINDOW_S)
        now_busy, now_idle = _cpu_times()
        if (now_idle - idle) >= IDLE_SHARE * ((now_busy - busy) + (now_idle - idle)):
            break
        busy, idle = now_busy, now_idle
    return time.perf_counter() - started


def _cpu_times() -> tuple[int, int]:
    """All CPUs' busy and idle (idle + iowait) time so far, in clock ticks."""
    with open("/proc/stat", encoding="ascii") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:8]]
    idle = ticks[3] + ticks[4]
    return sum(ticks) - idle, idle


if __name__ == "__main__":
    sys.exit(main())
