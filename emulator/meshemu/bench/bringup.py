"""Time to bring a lab up and down (needs root and the TAP medium).

    python -m meshemu.bench.bringup [--topology topologies/random100.yaml] [--runs 5]

Prints min/median/max of the resolution (validation, placement), `up` (state,
hosts files, the medium's namespaces and TAPs, its ready line) and `down`
(stop, remove) times, and checks that nothing is left after each run.
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshemu.bench.bringup", description=__doc__.splitlines()[0])
    parser.add_argument("--topology", type=Path, default=DEFAULT_TOPOLOGY)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--name", default="benchup", help="lab name used for the runs")
    args = parser.parse_args(argv)
    timings: dict[str, list[float]] = {"resolve": [], "up": [], "down": []}
    try:
        for _ in range(args.runs):
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


if __name__ == "__main__":
    sys.exit(main())
