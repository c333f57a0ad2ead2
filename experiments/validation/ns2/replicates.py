"""ns-2's own spread for a run: the scenario of each planned ns-2 run (its
nodes, moves and traffic, all drawn from the run's seed) simulated again
with ns-2's RNG (MAC backoff, routing jitter) seeded 1, 2, ..., N instead,
so that a cell the lab ran several times, whose runs differ in their
timing, can be set beside as many draws of ns-2 rather than its one run:

    python experiments/validation/ns2/replicates.py EXPERIMENT.yaml [--only PARAM=VALUE ...]
        [--set PATH=VALUE ...] [--replicates N] [--metric goodput_bps ...] [--sum] [--jobs 2]

One line per planned run, flow and metric (`--metric` again for more): its
min / median / max over the replicates and every value in replicate order.
With `--sum`, where a run has several flows of a kind (tcp, udp), one more
line per metric for their sum in each replicate (grid13's eight clients'
TCP; for counts and rates, not for fractions such as loss).
The replicate equal to the run's seed is `meshemu run --driver ns2`'s own
run. The runs' artefacts go to a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from meshemu.experiment import plan as experiment_plan
from meshemu.experiment.execute import NS2_PROGRAM, Tools
from meshemu.experiment.runner import select_runs
from meshemu.experiment.runs import NS2, Run
from meshemu.ns2.driver import Ns2Execution, ns_version


def flow_metrics(run: Run, number: int, directory: Path, program: str, version: dict[str, Any],
                 stop: threading.Event) -> list[dict[str, Any]]:
    execution = Ns2Execution(run, directory / f"{run.run_id}-{number}", program, version, stop,
                             f"{run.label()} replicate {number}", replicate=number)
    return execution.execute().metrics["flows"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, help="an experiment file")
    parser.add_argument("--only", action="append", default=[], metavar="PARAM=VALUE")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="PATH=VALUE")
    parser.add_argument("--replicates", type=int, default=10, help="ns-2 seeds 1..N for each run (default 10)")
    parser.add_argument("--metric", action="append", dest="metrics", metavar="METRIC",
                        help="a flow's figure, e.g. rto_events (default goodput_bps; again for more)")
    parser.add_argument("--sum", action="store_true",
                        help="also each metric summed over a run's flows of a kind (counts and rates)")
    parser.add_argument("--jobs", type=int, default=2, help="ns processes at a time (default 2)")
    args = parser.parse_args()
    wanted = args.metrics or ["goodput_bps"]
    plan = experiment_plan.load_experiment(args.file, overrides=args.overrides, driver=NS2)
    runs = select_runs(plan, args.only)
    program = Tools.find(runs)[NS2_PROGRAM]
    version = ns_version(program)
    stop = threading.Event()
    numbers = range(1, args.replicates + 1)
    with tempfile.TemporaryDirectory(prefix="ns2-replicates-") as temporary, \
            ThreadPoolExecutor(args.jobs) as pool:
        for run in runs:
            futures = [pool.submit(flow_metrics, run, number, Path(temporary), program, version, stop)
                       for number in numbers]
            flows = [future.result() for future in futures]
            for index, flow in enumerate(flows[0]):
                for metric in wanted:
                    values = [replicate[index].get(metric) for replicate in flows]
                    if any(value is None for value in values):
                        print(f"{run.label()} {flow['name']}: no {metric}")
                        continue
                    print_line(f"{run.label()} {flow['name']} {metric}", args.replicates, values)
            for kind in ("tcp", "udp") if args.sum else ():
                indices = [index for index, flow in enumerate(flows[0]) if flow["kind"] == kind]
                for metric in wanted if len(indices) > 1 else []:
                    rows = [[replicate[index].get(metric) for index in indices] for replicate in flows]
                    if all(None not in row for row in rows):
                        print_line(f"{run.label()} all {len(indices)} {kind} flows {metric} (sum)", args.replicates,
                                   [sum(row) for row in rows])


def print_line(what: str, replicates: int, values: list[float]) -> None:
    print(f"{what}, ns-2 seeds 1-{replicates}: {min(values):.6g} / {statistics.median(values):.6g} / "
          f"{max(values):.6g}; " + ", ".join(f"{value:.6g}" for value in values))


if __name__ == "__main__":
    main()
