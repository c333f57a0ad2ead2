"""`meshemu up`, `down`, `status`, `exec`, `shell`, `stats`, `move`,
`capture`, `view`, `cleanup`: a lab's life and what runs in it."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from rich import box
from rich.markup import escape
from rich.table import Table

from .. import arptable, medium, procs, units
from ..errors import LabError, MeshemuError
from ..lab import Lab
from ..state import chosen_lab, dirs_without_state, lab_names, read_state, run_dir_of
from ..teardown import remove_dangling_by_netns_links, teardown
from .common import AddCommand, err, out


def register(command: AddCommand) -> None:
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

    sub = command("view", _view, "a live view of a lab in the browser: map, links, air statistics, flows "
                                  "along their routes; drag a node to move it; or the replay of a recorded run: "
                                  "view RESULTS_DIR --run ID (served on 127.0.0.1)")
    sub.add_argument("results", nargs="?", metavar="RESULTS_DIR", help="an experiment's results, to replay a run")
    sub.add_argument("--run", metavar="ID", help="the run to replay (recorded with measure: {view: 500ms})")
    sub.add_argument("--lab", metavar="LAB")
    sub.add_argument("--flow", action="append", default=[], metavar="SRC:DST",
                     help="show this flow along its route (repeatable; a run's lab shows the run's flows)")
    sub.add_argument("--captures", type=Path, default=Path("."), metavar="DIR",
                     help="where captures started from the page go (default: here)")
    sub.add_argument("--port", type=_port, default=0, help="the port on 127.0.0.1 (default: a free one)")

    sub = command("cleanup", _cleanup, "remove everything recorded for a lab (or for every lab), "
                                        "also after a crash")
    sub.add_argument("lab", nargs="?", metavar="LAB")


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


def _down(args: argparse.Namespace) -> int:
    name = chosen_lab(args.lab)
    run_dir = run_dir_of(name)
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
        for run_dir in dirs_without_state():
            report += teardown(run_dir)
        limits = arptable.update()  # also when the labs that raised them left no state
        if limits:
            report.append(limits)
        remove_dangling_by_netns_links(report)  # last: it removes /run/meshemu once empty
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


def _say_now(line: str) -> None:
    print(line, flush=True)  # the address, for whoever waits for it


def _view(args: argparse.Namespace) -> int:
    from ..view import serve_lab, serve_replay  # aiohttp is imported only by this command

    if args.results is not None or args.run is not None:
        if args.results is None or args.run is None:
            raise MeshemuError("a replay needs both: meshemu view RESULTS_DIR --run ID")
        if args.lab is not None or args.flow:
            raise MeshemuError("--lab and --flow are for a live lab, not a replay")
        serve_replay(Path(args.results), args.run, args.port, _say_now)
        return 0
    if not args.captures.is_dir():
        raise MeshemuError(f"--captures {args.captures}: no such directory")
    serve_lab(args.lab, args.port, args.flow, args.captures, _say_now)
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
