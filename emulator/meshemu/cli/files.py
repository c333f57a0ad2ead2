"""`meshemu validate` and `meshemu sim`: topology, sim and experiment files
checked, sim files run in virtual time."""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .. import simfile
from ..errors import ConfigError
from ..experiment import plan as experiment_plan
from ..experiment.runs import DRIVERS, LAB
from ..simfile import SimPlan, SimResult
from ..source import Document, load_yaml
from ..topology import resolve_topology
from .common import AddCommand, err, out, positive_int

# Per-flow columns in the sim table up to this many flows; a summary beyond.
MAX_FLOW_COLUMNS = 6


def register(command: AddCommand) -> None:
    sub = command("validate", _validate, "check topology, sim and experiment files")
    sub.add_argument("files", nargs="+", metavar="FILE")
    sub.add_argument("--driver", choices=DRIVERS, default=LAB,
                     help="plan experiment files for this driver of meshemu run (default lab)")

    sub = command("sim", _sim, "run a sim file in virtual time (every sweep point and seed)")
    sub.add_argument("file", metavar="FILE")
    sub.add_argument("--json", action="store_true", help="one JSON object per run on stdout")
    sub.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1,
                     help="runs in parallel (default: the number of cores)")
    sub.add_argument("--dry-run", action="store_true",
                     help="print each run's scenario (the input of meshemu-medium sim) as one JSON line; run nothing")


def _validate(args: argparse.Namespace) -> int:
    failed = False
    for name in args.files:
        try:
            summary, notes = validate_file(name, args.driver)
        except ConfigError as exc:
            failed = True
            for problem in exc.problems:
                print(problem, file=sys.stderr)
            continue
        out.print(escape(f"{name}: ok ({summary})"))
        for note in notes:
            out.print(escape(f"  {note}"))
    return 1 if failed else 0


def _runs(count: int) -> str:
    return f"{count} run{'s' if count != 1 else ''}"


def validate_file(name: str, driver: str = LAB) -> tuple[str, list[str]]:
    """What `meshemu validate` checks of one file (every scale of an
    experiment planned): a summary, and notes on the runs this machine
    cannot carry out. Raises ConfigError."""
    document = load_yaml(name)
    if experiment_plan.is_experiment_file(document):
        return _validate_experiment(name, document, driver)
    if simfile.is_sim_file(document):
        return f"sim file, {_runs(len(simfile.plan_sim(document).runs))}", []
    topology = resolve_topology(document)
    return f"topology, {len(topology.nodes)} nodes", []


def _validate_experiment(name: str, document: Document, driver: str) -> tuple[str, list[str]]:
    scales = document.data.get("scales")
    counts: list[str] = []
    skipped: collections.Counter[str] = collections.Counter()
    kernel = False  # some runs need what another kernel has
    # Every scale must give a valid plan too: `--scale full` must not fail hours later.
    for scale in [None, *(scales if isinstance(scales, dict) else {})]:
        label = "" if scale is None else f"scale {scale}: "
        try:
            plan = experiment_plan.plan_experiment(document.copy(), scale=scale, driver=driver)
        except experiment_plan.NothingRunsHere as exc:
            if driver != LAB:
                raise
            counts.append(f"{label}no run on this machine")
            skips = exc.skipped
        else:
            counts.append(label + _runs(len(plan.runs)) + (f" ({len(plan.skipped)} skipped)" if plan.skipped else ""))
            skips = plan.skipped
        skipped.update(skip.reason for skip in skips)
        kernel |= any(skip.kernel for skip in skips)
    notes = [f"skipped ({_runs(count)}): {reason}" for reason, count in skipped.items()]
    if kernel:
        notes.append(f"those run where the kernel has them, such as the VM (every congestion control Debian ships): "
                     f"meshemu vm -- meshemu validate {name}")
    return "experiment file, " + "; ".join(counts), notes


def _sim(args: argparse.Namespace) -> int:
    plan = simfile.load_sim(args.file)
    if args.dry_run:
        for run in plan.runs:
            print(json.dumps({"params": run.params, "seed": run.seed, "scenario": run.scenario}))
        return 0
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=err, transient=True) as progress:
        task = progress.add_task(f"sim {Path(args.file).name}", total=len(plan.runs))
        results = simfile.run_plan(plan, args.jobs, on_done=lambda _: progress.advance(task))
    if args.json:
        for result in results:
            print(json.dumps(result.as_json()))
    else:
        out.print(_sim_table(plan, results))
    failures = [result for result in results if result.error is not None]
    for result in failures:
        print(f"meshemu: run {_describe_run(result)} failed: {result.error}", file=sys.stderr)
    return 1 if failures else 0


def _describe_run(result: SimResult) -> str:
    parts = [f"{path}={_param_text(value, result.run.choices[path])}" for path, value in result.run.params.items()]
    parts.append(f"seed={result.run.seed}")
    return " ".join(parts)


def _mbps(bps: float) -> str:
    return f"{bps / 1e6:.3f}"


def _flow_outputs(result: SimResult) -> list[dict[str, Any]]:
    """The medium's per-flow results in the scenario's flow order."""
    assert result.output is not None
    flows = result.output.get("flows", [])
    if isinstance(flows, dict):
        return [flows[flow["name"]] for flow in result.run.scenario["flows"]]
    return list(flows)


def _param_text(value: Any, choice: int) -> str:
    """A swept value for the table: as written if short, else its position
    in the sweep list (#1 is the first)."""
    if isinstance(value, list) and all(not isinstance(item, (list, dict)) for item in value):
        text = "[" + ", ".join(str(item) for item in value) + "]"
    elif isinstance(value, (list, dict)):
        text = ""
    else:
        text = str(value)
    return text if text and len(text) <= 24 else f"#{choice + 1}"


def _short_path(path: str, paths: list[str]) -> str:
    """The last part of a sweep path, or the whole path when that is ambiguous."""
    last = path.rsplit(".", 1)[-1]
    return last if sum(other.rsplit(".", 1)[-1] == last for other in paths) == 1 else path


def _sim_table(plan: SimPlan, results: list[SimResult]) -> Table:
    title = plan.description or Path(plan.file).name
    table = Table(title=escape(title), caption=escape("throughput in Mbit/s over [warmup, duration]"))
    for path in plan.sweep_paths:
        table.add_column(escape(_short_path(path, plan.sweep_paths)))
    table.add_column("seed", justify="right")
    flow_counts = {len(result.run.scenario["flows"]) for result in results}
    per_flow = max(flow_counts) <= MAX_FLOW_COLUMNS and len(flow_counts) == 1
    if per_flow:
        for flow in results[0].run.scenario["flows"]:
            dst = flow["dst"] if flow["dst"] == "broadcast" else results[0].run.topology.nodes[flow["dst"]].name
            table.add_column(f"{flow['name']} {results[0].run.topology.nodes[flow['src']].name}→{dst}",
                             justify="right")
    else:
        table.add_column("per flow min/median/max", justify="right")
    table.add_column("total", justify="right")
    table.add_column("delivered/generated", justify="right")
    for result in results:
        row = [escape(_param_text(value, result.run.choices[path])) for path, value in result.run.params.items()]
        row.append(str(result.run.seed))
        if result.output is None:
            row += ["failed"] * (len(table.columns) - len(row))
            table.add_row(*row)
            continue
        flows = _flow_outputs(result)
        rates = [flow["throughput_bps"] for flow in flows]
        if per_flow:
            row += [_mbps(rate) for rate in rates]
        else:
            row.append("/".join(_mbps(value) for value in (min(rates), statistics.median(rates), max(rates))))
        delivered = sum(flow["delivered"] for flow in flows)
        generated = sum(flow["generated"] for flow in flows)
        row += [_mbps(sum(rates)), f"{delivered}/{generated}"]
        table.add_row(*row)
    return table
