"""The `meshemu` command line."""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import hwsim, medium, procs, simfile, units, vm
from .errors import ConfigError, LabError, MeshemuError
from .experiment import clusterhost
from .experiment import plan as experiment_plan
from .experiment.runs import DRIVERS, LAB
from .lab import Lab
from .simfile import SimPlan, SimResult
from .source import Document, load_yaml
from .state import lab_names, read_state, run_dir_of
from .teardown import remove_dangling_by_netns_links, teardown
from .topology import resolve_topology

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

# Per-flow columns in the sim table up to this many flows; a summary beyond.
MAX_FLOW_COLUMNS = 6


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    argv = sys.argv[1:] if argv is None else argv
    # Everything after the first "--" is the command of `exec` or `vm`, options included.
    command = argv[argv.index("--") + 1:] if "--" in argv else None
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    args.command_line = argv
    if command is not None:
        if args.handler not in (_exec, _vm):
            parser.error("only exec and vm take a command after --")
        args.argv += command
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

    sub = command("up", _up, "bring a lab up from a topology file")
    sub.add_argument("file", metavar="FILE")
    sub.add_argument("--name", metavar="LAB", help="lab name (default: the name in the file)")

    sub = command("down", _down, "stop a lab and remove everything it created")
    sub.add_argument("lab", nargs="?", metavar="LAB")

    sub = command("status", _status, "list the labs, or show one lab's nodes and medium")
    sub.add_argument("lab", nargs="?", metavar="LAB")

    sub = command("exec", _exec, "run a command in a node: meshemu exec n0 -- ping -c 3 n7")
    sub.add_argument("node", metavar="NODE")
    sub.add_argument("--lab", metavar="LAB")
    sub.add_argument("argv", nargs="*", metavar="-- CMD", help="the command and its arguments, after --")

    sub = command("shell", _shell, "an interactive shell in a node ($SHELL or /bin/bash)")
    sub.add_argument("node", metavar="NODE")
    sub.add_argument("--lab", metavar="LAB")

    sub = command("stats", _stats, "radio statistics of every node, or of one")
    sub.add_argument("node", nargs="?", metavar="NODE")
    sub.add_argument("--lab", metavar="LAB")
    sub.add_argument("--json", action="store_true", help="the medium's full counters as JSON")

    sub = command("move", _move, "teleport a node (coordinates in metres, or with units: 1.2km)")
    sub.add_argument("node", metavar="NODE")
    sub.add_argument("coordinates", nargs="+", metavar="X Y [Z]")
    sub.add_argument("--lab", metavar="LAB")

    sub = command("capture", _capture, "air capture: capture start FILE | capture stop; "
                                        "or tcpdump in a node: capture --node NODE FILE")
    sub.add_argument("what", nargs="+", metavar="start FILE | stop | FILE")
    sub.add_argument("--node", metavar="NODE", help="run tcpdump on the node's wlan0 instead (until Ctrl-C)")
    sub.add_argument("--lab", metavar="LAB")

    sub = command("view", _view, "a live view of a lab in the browser: map, links, air statistics; "
                                  "drag a node to move it (served on 127.0.0.1)")
    sub.add_argument("--lab", metavar="LAB")
    sub.add_argument("--port", type=_port, default=0, help="the port on 127.0.0.1 (default: a free one)")

    sub = command("cleanup", _cleanup, "remove everything recorded for a lab (or for every lab), "
                                        "also after a crash")
    sub.add_argument("lab", nargs="?", metavar="LAB")

    sub = command("validate", _validate, "check topology, sim and experiment files")
    sub.add_argument("files", nargs="+", metavar="FILE")
    sub.add_argument("--driver", choices=DRIVERS, default=LAB,
                     help="plan experiment files for this driver of meshemu run (default lab)")

    sub = command("sim", _sim, "run a sim file in virtual time (every sweep point and seed)")
    sub.add_argument("file", metavar="FILE")
    sub.add_argument("--json", action="store_true", help="one JSON object per run on stdout")
    sub.add_argument("--jobs", type=_positive_int, default=os.cpu_count() or 1,
                     help="runs in parallel (default: the number of cores)")
    sub.add_argument("--dry-run", action="store_true",
                     help="print each run's scenario (the input of meshemu-medium sim) as one JSON line; run nothing")

    sub = command("run", _run, "run an experiment file in labs (or in ns-2, or the model in virtual time): every "
                               "sweep point and seed, one record per run")
    sub.add_argument("file", metavar="EXPERIMENT")
    _run_options(sub)

    sub = command("scheduler", _scheduler, "start the scheduler of a cluster of hosts (Dask, mutual TLS): workers "
                                            "join it, meshemu run --cluster sends it runs")
    sub.add_argument("--listen", default="127.0.0.1", metavar="HOST",
                     help="address to listen on (default: loopback; an address of this host for workers elsewhere)")
    sub.add_argument("--port", type=_positive_int, default=clusterhost.PORT)
    sub.add_argument("--dashboard", default=clusterhost.DASHBOARD, metavar="HOST:PORT",
                     help="the scheduler's web dashboard (default %(default)s: reach it through ssh -L)")
    _secret_option(sub)

    sub = command("worker", _worker, "join a cluster and carry out its runs: meshemu worker tls://HEAD:8786")
    sub.add_argument("address", metavar="ADDRESS", help="the scheduler's address, as `meshemu scheduler` prints it")
    sub.add_argument("--slots", type=_positive_int, default=clusterhost.default_slots(),
                     help="labs at once (default: one per two cores, %(default)s here)")
    sub.add_argument("--name", default=socket.gethostname(),
                     help="the worker's name, recorded as the host of its runs (default: the host name)")
    _secret_option(sub)

    sub = command("vm", _vm, "run a command in a VM with Debian's stock kernel (mac80211_hwsim, every TCP "
                             "congestion control): meshemu vm -- meshemu run exp.yaml")
    vm.add_arguments(sub)
    sub.set_defaults(argv=[])

    sub = command("report", _report, "tables with 90%% confidence intervals, paired t-tests and plots of a "
                                      "results directory")
    sub.add_argument("dir", metavar="RESULTS_DIR")
    sub.add_argument("--x", metavar="PARAM", help="x axis of the plots: a swept parameter or hops "
                                                  "(default: the first swept parameter)")
    sub.add_argument("--group", metavar="PARAM", help="one series per value of this parameter")
    sub.add_argument("--compare", metavar="PARAM", help="paired t-tests between the values of this parameter "
                                                        "(default: --group)")
    sub.add_argument("--metric", action="append", metavar="NAME",
                     help="metrics to report, e.g. goodput_bps or medium.mac_drop_fraction (repeatable; "
                          "default: goodput of every flow)")
    sub.add_argument("--trace", metavar="RUN_ID", help="also draw the time series of this run (cwnd, RTT, "
                                                       "sequence/ACK events)")
    sub.add_argument("--spread", action="store_true", help="the table gives min / median / max over the seeds "
                                                           "instead of mean ± 90%% CI")

    sub = command("demo", _demo, "the demo: chain7 with TCP and UDP flows to 1, 2, 4 and 7 hops, "
                                  "and a table per hop count")
    _run_options(sub, demo=True)
    return parser


def _run_options(sub: argparse.ArgumentParser, demo: bool = False) -> None:
    sub.add_argument("--driver", choices=DRIVERS, default=LAB,
                     help="lab (default): real-time labs of Linux namespaces; ns2: each run translated into an "
                          "ns-2.35 scenario and simulated; sim: each run by our model in virtual time "
                          "(meshemu-medium sim); what ns-2 or the sim cannot do is refused")
    sub.add_argument("--jobs", type=_positive_int, default=None,
                     help="runs at once (labs: default 1, they run in real time and more than half the cores "
                          "makes them late; ns2 and sim: default the number of cores)")
    sub.add_argument("--resume", action="store_true", help="skip the runs already recorded in the results")
    sub.add_argument("--only", action="append", default=[], metavar="PARAM=VALUE",
                     help="only the runs with this swept value (or seed=N); repeatable, all must match")
    sub.add_argument("--set", action="append", default=[], dest="overrides", metavar="PATH=VALUE",
                     help="override a value of the file (dotted path, YAML value), e.g. --set duration=20s")
    sub.add_argument("--scale", metavar="NAME",
                     help="apply the file's scales.NAME (e.g. full: the paper's whole design) before any --set")
    sub.add_argument("--out", metavar="DIR", help="results directory (default: results/<experiment name>)")
    sub.add_argument("--cluster", metavar="ADDRESS",
                     help="carry out the runs on the workers of this cluster (meshemu scheduler prints its address); "
                          "--jobs then caps the runs at once (default: every lab slot)")
    _secret_option(sub)
    sub.add_argument("--dry-run", action="store_true", help="list the runs and their ids; run nothing")


def _secret_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--secret", type=Path, default=clusterhost.DEFAULT_SECRET, metavar="FILE",
                     help="the cluster's secret (meshemu scheduler creates it; default %(default)s)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


# --- labs ---------------------------------------------------------------------------------

def _position_text(position: list[float] | tuple[float, ...]) -> str:
    text = f"({position[0]:.0f}, {position[1]:.0f}"
    return text + (f", {position[2]:.0f})" if position[2] else ")")


def _up(args: argparse.Namespace) -> int:
    lab = Lab.from_file(args.file, args.name)
    with err.status(f"bringing up {lab.name} ({len(lab)} nodes)"):
        started = time.monotonic()
        lab.up()
        elapsed = time.monotonic() - started
    assert lab.ready is not None
    names = list(lab.nodes)
    heard = medium.rx_neighbours({"links": lab.ready.get("links", [])}, len(names))
    table = Table(title=f"lab {lab.name}: {len(names)} nodes, up in {elapsed:.2f} s")
    for column in ("node", "address", "position (m)", "neighbours in range"):
        table.add_column(column)
    for node in lab:
        mobility = lab.config["medium"]["nodes"][node.index]["mobility"]["kind"]
        position = "random" if mobility == "random_waypoint" else _position_text(node.initial_position)
        if mobility not in ("static", "random_waypoint"):
            position += f" {mobility}"
        table.add_row(node.name, node.ip, position, " ".join(names[i] for i in sorted(heard[node.index])) or "-")
    out.print(table)
    out.print(f"run commands with: meshemu exec {names[0]} -- CMD...    stop with: meshemu down {lab.name}")
    return 0


def _lab_dir(name: str | None) -> tuple[str, Path]:
    """The run directory of the named lab, or of the only one."""
    if name is None:
        names = lab_names()
        if not names:
            raise LabError("no lab is up")
        if len(names) > 1:
            raise LabError(f"several labs are up ({', '.join(names)}): name one")
        name = names[0]
    if name not in lab_names():
        raise LabError(f"no lab named {name!r} (labs: {', '.join(lab_names()) or 'none'})")
    return name, run_dir_of(name)


def _down(args: argparse.Namespace) -> int:
    name, run_dir = _lab_dir(args.lab)
    report = teardown(run_dir)
    out.print(f"lab {name} is down ({len(report)} things removed)")
    return 0


def _cleanup(args: argparse.Namespace) -> int:
    report: list[str] = []
    if args.lab is not None:
        report += teardown(run_dir_of(args.lab))
    else:
        for name in lab_names():
            report += teardown(run_dir_of(name))
        remove_dangling_by_netns_links(report)
    for line in report:
        out.print(escape(line))
    if not report:
        out.print("nothing to clean up")
    return 0


def _status(args: argparse.Namespace) -> int:
    if args.lab is None and len(lab_names()) != 1:
        return _status_all()
    lab = Lab.attach(args.lab)
    status = lab.status()
    positions = lab.positions()
    table = Table(title=f"lab {lab.name}: medium time {status.get('time_ns', 0) / 1e9:.1f} s")
    for column in ("node", "netns", "address", "position (m)"):
        table.add_column(column)
    for node in lab:
        table.add_row(node.name, node.netns, node.ip, _position_text(positions.get(node.name, node.initial_position)))
    out.print(table)
    lateness = status.get("lateness") or {}
    if lateness.get("count"):
        out.print(f"lateness of the medium's actions: p50 {lateness['p50_ns'] / 1e3:.0f} us, "
                  f"p99 {lateness['p99_ns'] / 1e3:.0f} us, max {lateness['max_ns'] / 1e3:.0f} us "
                  f"({lateness['count']} actions)")
    return 0


def _status_all() -> int:
    names = lab_names()
    if not names:
        out.print("no lab is up")
        return 0
    table = Table(title="labs")
    for column in ("lab", "nodes", "medium", "topology"):
        table.add_column(column)
    for name in names:
        try:
            state = read_state(run_dir_of(name))
        except LabError as exc:
            table.add_row(name, "?", f"broken: {escape(str(exc))}", "")
            continue
        record = state.medium()
        alive = record is not None and procs.is_alive(record.id)
        medium_text = f"running (pid {record.pid})" if alive and record else "not running: meshemu cleanup " + name
        table.add_row(name, str(len(state.namespaces)), medium_text, escape(state.topology or "-"))
    out.print(table)
    return 0


def _exec(args: argparse.Namespace) -> int:
    if not args.argv:
        raise MeshemuError("give the command after --, e.g. meshemu exec n0 -- ping -c 3 n7")
    node = Lab.attach(args.lab)[args.node]
    command = node.command(args.argv)
    os.execvp(command[0], command)


def _shell(args: argparse.Namespace) -> int:
    lab = Lab.attach(args.lab)
    node = lab[args.node]
    shell = os.environ.get("SHELL") or "/bin/bash"
    command = node.command([shell])
    environment = dict(os.environ, MESHEMU_LAB=lab.name, MESHEMU_NODE=node.name)
    os.execvpe(command[0], command, environment)


# Counters shown by `meshemu stats` (all of them with --json), short titles to fit 80 columns.
STATS_COLUMNS = [("tx_data_frames", "tx"), ("rx_frames", "rx"), ("data_attempts", "tries"), ("rts_attempts", "rts"),
                 ("retry_drops", "rdrop"), ("queue_drops", "qdrop"), ("rx_collisions", "coll"), ("defers", "defer")]


def _stats(args: argparse.Namespace) -> int:
    lab = Lab.attach(args.lab)
    nodes = lab.stats(args.node)
    if args.json:
        print(json.dumps(nodes))
        return 0
    time_ns = lab.status().get("time_ns") or 0
    table = Table(title=f"lab {lab.name}: radio statistics after {time_ns / 1e9:.1f} s", box=box.SIMPLE_HEAD,
                  caption="tx: unicast frames acknowledged, tries: data transmissions with retries, rdrop/qdrop: "
                          "dropped at the retry limit / full queue, coll: receptions lost to interference, "
                          "defer: found the medium busy, busy: share of time the medium was busy")
    table.add_column("node")
    for _, title in STATS_COLUMNS:
        table.add_column(title, justify="right")
    table.add_column("busy", justify="right")
    for name, counters in nodes.items():
        busy = f"{100 * counters.get('busy_ns', 0) / time_ns:.1f}%" if time_ns else "-"
        table.add_row(name, *[str(counters.get(key, "-")) for key, _ in STATS_COLUMNS], busy)
    out.print(table)
    return 0


def _coordinate(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return units.LENGTH.parse(text)
    except ValueError as exc:
        raise MeshemuError(f"bad coordinate {text!r}: {exc}") from None


def _move(args: argparse.Namespace) -> int:
    if len(args.coordinates) not in (2, 3):
        raise MeshemuError("give X Y or X Y Z, e.g. meshemu move n3 400 0")
    coordinates = [_coordinate(text) for text in args.coordinates]
    lab = Lab.attach(args.lab)
    lab.move(args.node, *coordinates)
    out.print(f"{args.node} is now at {_position_text(lab.positions()[args.node])}")
    return 0


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}")
    return port


def _view(args: argparse.Namespace) -> int:
    from .view import serve_lab  # aiohttp is imported only by this command

    serve_lab(args.lab, args.port, lambda line: print(line, flush=True))
    return 0


def _capture(args: argparse.Namespace) -> int:
    lab = Lab.attach(args.lab)
    if args.node is not None:
        if len(args.what) != 1:
            raise MeshemuError("capture --node NODE FILE: give one file")
        path = str(Path(args.what[0]).resolve())
        command = lab[args.node].command(["tcpdump", "-i", "wlan0", "-U", "-w", path])
        os.execvp(command[0], command)
    if args.what[0] == "start" and len(args.what) == 2:
        lab.capture(args.what[1], run=True)
        out.print(f"capturing the air of lab {lab.name} into {Path(args.what[1]).resolve()}")
    elif args.what == ["stop"]:
        lab.capture(None, run=False)
        out.print("capture stopped")
    else:
        raise MeshemuError("usage: meshemu capture start FILE | meshemu capture stop | "
                           "meshemu capture --node NODE FILE")
    return 0


# --- validate ---------------------------------------------------------------------------

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
    # Every scale must give a valid plan too: `--scale full` must not fail hours later.
    for scale in [None, *(scales if isinstance(scales, dict) else {})]:
        label = "" if scale is None else f"scale {scale}: "
        try:
            plan = experiment_plan.plan_experiment(document.copy(), scale=scale, driver=driver)
        except experiment_plan.NothingRunsHere as exc:
            if driver != LAB:
                raise
            counts.append(f"{label}no run on this machine")
            skipped.update(skip.reason for skip in exc.skipped)
            continue
        counts.append(label + _runs(len(plan.runs)) + (f" ({len(plan.skipped)} skipped)" if plan.skipped else ""))
        skipped.update(skip.reason for skip in plan.skipped)
    notes = [f"skipped ({_runs(count)}): {reason}" for reason, count in skipped.items()]
    if skipped and driver == LAB:  # a lab skips only what this kernel lacks
        notes.append(f"those run where the kernel has them, such as the VM (every congestion control Debian ships): "
                     f"meshemu vm -- meshemu validate {name}")
    return "experiment file, " + "; ".join(counts), notes


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


# --- the VM mode ----------------------------------------------------------------------------

def _vm(args: argparse.Namespace) -> int:
    command = args.argv
    # The guest's PATH is the caller's, which may not hold the venv: run our own program by its interpreter.
    if command[:1] == ["meshemu"]:
        command = [sys.executable, "-m", "meshemu", *command[1:]]
    return _vm_run(command, args.memory, args.cpus, args.rw)


def _vm_run(command: list[str], memory: str, cpus: int | None, writable: list[str]) -> int:
    return vm.run(command, shared=[Path(d) for d in writable], memory=memory, cpus=cpus)


# --- a cluster of hosts -------------------------------------------------------------------

def _scheduler(args: argparse.Namespace) -> int:
    clusterhost.require_dask()
    clusterhost.serve_scheduler(args.listen, args.port, args.dashboard, args.secret, _announce)
    return 0


def _worker(args: argparse.Namespace) -> int:
    clusterhost.require_dask()
    clusterhost.serve_worker(args.address, args.slots, args.name, args.secret, _announce)
    return 0


def _announce(line: str) -> None:
    err.print(escape(line))


# --- experiments --------------------------------------------------------------------------

def _run(args: argparse.Namespace) -> int:
    plan = experiment_plan.load_experiment(args.file, overrides=args.overrides, scale=args.scale, driver=args.driver)
    # On a cluster the workers check what the runs need (a topology asking for the VM is refused there).
    asks_vm = any(run.topology.backend.get("vm") for run in plan.runs)
    if asks_vm and not args.dry_run and not args.cluster and not hwsim.in_vm():
        out.print("The experiment's topology asks for the VM (backend.vm: true): running it there.")
        return _vm_run([sys.executable, "-m", "meshemu", *args.command_line], vm.DEFAULT_MEMORY, None, [])
    return _run_plan(plan, args)


def _run_plan(plan: experiment_plan.Plan, args: argparse.Namespace) -> int:
    from .experiment.results import ResultsDir
    from .experiment.runner import Runner, cores, select_runs

    runs = select_runs(plan, args.only)
    results = ResultsDir(Path(args.out) if args.out else Path("results") / plan.name)
    if args.dry_run:
        for run in runs:
            print(f"{run.run_id}  {run.label()}")
        return 0
    lab = args.driver == LAB
    if args.cluster:
        clusterhost.require_dask()
    elif lab and os.geteuid() != 0:
        raise LabError("experiments run in labs, which need root (network namespaces): run as root "
                       "(or --driver ns2 or sim)")
    if not args.resume and results.records():
        raise MeshemuError(f"{results.path} holds results already: --resume to add the missing runs (runs of "
                           "another driver have their own ids), or --out DIR for a new directory")
    if args.jobs is None and not args.cluster:
        args.jobs = 1 if lab else cores()
    if lab and not args.cluster and args.jobs > max(1, cores() // 2):
        err.print(f"[yellow]warning: --jobs {args.jobs} on {cores()} cores: labs run in real time and may fall "
                  "behind (runs are flagged behind_real_time)[/yellow]")
    err.print(f"{escape(plan.description or plan.name)}: {len(runs)} runs, results in {results.path}")
    if args.cluster:
        from .experiment.cluster import Cluster, ClusterRunner

        with Cluster(args.cluster, args.secret, err) as cluster:
            summary = ClusterRunner(plan, results, args.jobs, err, cluster).run(runs, args.resume)
    else:
        summary = Runner(plan, results, args.jobs, err).run(runs, args.resume)
    not_recorded = summary.pending - len(summary.done) - len(summary.failed)
    parts = [f"{len(summary.done)} runs recorded"]
    if summary.skipped_recorded:
        parts.append(f"{summary.skipped_recorded} recorded before (skipped)")
    if summary.failed:
        parts.append(f"{len(summary.failed)} failed (see {results.path / 'failed.jsonl'})")
    if summary.behind_real_time:
        parts.append(f"{len(summary.behind_real_time)} behind real time")
    if not_recorded:
        parts.append(f"{not_recorded} not run")
    err.print(", ".join(parts) + f"; report with: meshemu report {results.path}")
    if summary.interrupted:
        err.print("interrupted: nothing is left running; meshemu run --resume carries on")
        return 130
    return 1 if summary.failed else 0


def _report(args: argparse.Namespace) -> int:
    from .experiment import report

    report.report(Path(args.dir), console=out, x=args.x, group=args.group, compare=args.compare,
                  metrics=args.metric, trace=args.trace, spread=args.spread)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from .experiment import demo

    plan = experiment_plan.load_experiment(demo.demo_file(), overrides=args.overrides, scale=args.scale,
                                           driver=args.driver)
    if args.out is None:  # every demo anew, unless asked to resume one
        args.out = str(Path("results") / f"demo-{time.strftime('%Y%m%d-%H%M%S')}")
    status = _run_plan(plan, args)
    if status == 0 and not args.dry_run:
        out.print(demo.table(Path(args.out), plan))
    return status
