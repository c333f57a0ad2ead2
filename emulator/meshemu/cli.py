"""The `meshemu` command line."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import simfile
from .errors import ConfigError, MeshemuError
from .simfile import SimPlan, SimResult
from .source import load_yaml
from .topology import resolve_topology

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

# Per-flow columns in the sim table up to this many flows; a summary beyond.
MAX_FLOW_COLUMNS = 6


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    try:
        return args.handler(args) or 0
    except ConfigError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return 1
    except MeshemuError as exc:
        print(f"meshemu: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `meshemu sim x.yaml --json | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="meshemu", description="Emulated 802.11 ad hoc multi-hop networks: "
                                                                 "labs of Linux namespaces over a modelled radio medium.")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    def command(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        return sub

    sub = command("validate", _validate, "check topology and sim files")
    sub.add_argument("files", nargs="+", metavar="FILE")

    sub = command("sim", _sim, "run a sim file in virtual time (every sweep point and seed)")
    sub.add_argument("file", metavar="FILE")
    sub.add_argument("--json", action="store_true", help="one JSON object per run on stdout")
    sub.add_argument("--jobs", type=_positive_int, default=os.cpu_count() or 1,
                     help="runs in parallel (default: the number of cores)")
    sub.add_argument("--dry-run", action="store_true",
                     help="print each run's scenario (the input of meshemu-medium sim) as one JSON line; run nothing")
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# --- validate ---------------------------------------------------------------------------

def _validate(args: argparse.Namespace) -> int:
    failed = False
    for name in args.files:
        try:
            out.print(f"{name}: ok ({_validate_one(name)})")
        except ConfigError as exc:
            failed = True
            for problem in exc.problems:
                print(problem, file=sys.stderr)
    return 1 if failed else 0


def _validate_one(name: str) -> str:
    document = load_yaml(name)
    if simfile.is_sim_file(document):
        plan = simfile.plan_sim(document)
        return f"sim file, {len(plan.runs)} run{'s' if len(plan.runs) != 1 else ''}"
    topology = resolve_topology(document)
    return f"topology, {len(topology.nodes)} nodes"


# --- sim ----------------------------------------------------------------------------------

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
    parts = [f"{path}={value}" for path, value in result.run.params.items()] + [f"seed={result.run.seed}"]
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
        row = [escape(str(value)) for value in result.run.params.values()] + [str(result.run.seed)]
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
