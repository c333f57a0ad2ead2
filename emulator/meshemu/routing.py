"""Routing plug-in: what a topology's `routing:` runs in a lab.

    routing: static                      # the medium installs minimum-hop routes at time 0
    routing: none                        # no routes beyond the subnet
    routing: aodv                        # aodvd (routing/aodv) in every node
    routing: {aodv: {hello_interval: 1s, local_repair: true}}
    routing: babeld                      # Debian's babeld, unmodified
    routing: {babeld: {hello_interval: 1s}}
    routing: copas                       # copasd (routing/copas) in every node
    routing: {copas: {backoff_thres: 6, t_collect: 1.5s}}
    routing: dsr                         # ns-2's DSR and DSDV: `meshemu run --driver ns2` only
    routing: dsdv

Each value is a kind (choices.py: one `RoutingKind` class per value, listed
in `ROUTING_KINDS`) that says what LAB.json asks of the medium and which
daemon runs in every node: its program, files, command line, how to tell
it is ready and where its counters and events are. This module runs that
description the same way for every kind: `start(lab)` once the medium is
ready, the counters, the run's outputs. Daemons are started with
`Node.spawn` (recorded in the lab state, stopped by PID at down); iptables
rules a daemon lists with `--print-rules` are recorded with
`record_iptables_rules` before it starts, so `meshemu cleanup` removes them
after a crash.

Per node, under `run_dir/nodes/<node>/`: `aodvd.toml`, `aodvd.log` (JSON
log), `aodv.json` (counters, rewritten when they change, at most every second, and at exit),
`aodv-events.jsonl` (route and discovery events with `mono_ns` timestamps);
`babeld.conf`, `babeld.log`, `babeld.pid`, `babeld.state`; copasd as aodvd
with `copasd.toml`, `copasd.log`, `copas.json`, `copas-events.jsonl`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

from .choices import ROUTING_KINDS, RoutingChoice
from .errors import LabError
from .nodedaemons import Started, node_dir, wait_until_ready
from .pluginapi import PluginLab
from .state import IptablesRule, record_iptables_rules

CHOICE_FILE = "routing.json"


def saved_choice(run_dir: Path) -> RoutingChoice:
    """The choice a lab was brought up with (static for labs without one)."""
    try:
        data = json.loads((run_dir / CHOICE_FILE).read_text())
        return RoutingChoice(data["name"], data["options"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return RoutingChoice("static")


def start(lab: PluginLab) -> None:
    """Starts the routing daemon of `lab.routing` in every node (after the
    medium is ready), all at once, waits until each is ready, and records
    the choice for `Lab.attach`."""
    choice: RoutingChoice = lab.routing
    (lab.run_dir / CHOICE_FILE).write_text(json.dumps(choice.to_json()))
    kind = choice.kind
    if kind.daemon is None:
        return
    program = kind.program()
    started = []
    for node in lab:
        directory = node_dir(lab, node.name)
        for name, text in kind.node_files(choice.options, directory, int(lab.config["medium"]["seed"]),
                                          node.index).items():
            (directory / name).write_text(text)
        argv = kind.argv(program, directory)
        if kind.prints_rules:
            listing = node.run(argv + ["--print-rules"], timeout=10)
            if listing.returncode != 0:
                raise LabError(f"{kind.daemon} refused its configuration on {node.name}: {listing.stderr.strip()}")
            record_iptables_rules(lab.run_dir, [IptablesRule(node.netns, rule["table"], rule["chain"], rule["rule"])
                                                for rule in json.loads(listing.stdout)])
        (directory / kind.ready_file).unlink(missing_ok=True)
        with open(directory / kind.log, "wb") as log:
            process = node.spawn(argv, stderr=log)
        started.append(Started(node.name, process, directory / kind.ready_file, directory / kind.log))
    wait_until_ready(started)


# --- counters -------------------------------------------------------------------------


def counters(lab: PluginLab) -> dict[str, dict[str, Any]]:
    """The routing daemon's counters of every node (aodvd's and copasd's:
    routing/aodv/README.md, "Counters"), as last written (at most a second
    old; see `refresh_counters`); none for a kind whose daemon writes none."""
    file_name = lab.routing.kind.counters
    result: dict[str, dict[str, Any]] = {}
    if file_name is None:
        return result
    for node in lab:
        path = lab.run_dir / "nodes" / node.name / file_name
        try:
            result[node.name] = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            continue
    return result


def control_traffic(lab: PluginLab) -> dict[str, Any] | None:
    """Routing control traffic every daemon of the lab sent so far:
    `control_bytes` (IP bytes) and `control_packets`, and for a daemon that
    counts its messages by kind (aodvd, copasd) `messages`, packets by kind
    (`rreq`, `rrep`, `rerr`, ...), and `overruns`, what the daemons lost:
    times the kernel dropped queued packets for them (`queue`) and times
    their neighbour notifications were lost (`neighbours`). Zero without a
    daemon (static and no routing); None when the daemon does not count its
    packets (babeld)."""
    kind = lab.routing.kind
    if kind.daemon is None:
        return {"control_bytes": 0, "control_packets": 0}
    if kind.counters is None:
        return None
    refresh_counters(lab)
    statuses = counters(lab).values()
    messages: dict[str, int] = {}
    for status in statuses:
        for message, sent in status["control_sent"].items():
            messages[message] = messages.get(message, 0) + sent["packets"]
    return {"control_bytes": sum(s["overhead_bytes"] for s in statuses),
            "control_packets": sum(s["overhead_packets"] for s in statuses),
            "messages": dict(sorted(messages.items())),
            "overruns": {"queue": sum(s["queue_overruns"] for s in statuses),
                         "neighbours": sum(s["neighbour_overruns"] for s in statuses)}}


def save_outputs(lab: PluginLab, directory: Path) -> list[Path]:
    """Copies what the routing daemons wrote about the run (events and
    counters of every node, e.g. aodvd's) to `directory` as
    `<node>.aodv-events.jsonl` and `<node>.aodv.json`, before the lab's run
    directory goes away."""
    names = [name for kind in ROUTING_KINDS.values() for name in (kind.events, kind.counters) if name is not None]
    saved = []
    for node in lab:
        for name in names:
            source = lab.run_dir / "nodes" / node.name / name
            if source.exists():
                directory.mkdir(parents=True, exist_ok=True)
                target = directory / f"{node.name}.{name}"
                shutil.copyfile(source, target)
                saved.append(target)
    return saved


def refresh_counters(lab: PluginLab, timeout: float = 2.0) -> None:
    """Asks the routing daemons this Lab object started for fresh counters
    (SIGUSR1, which aodvd and copasd answer) and waits until their files were
    rewritten."""
    kind = lab.routing.kind
    if kind.daemon is None or kind.counters is None:
        return
    before = {}
    for node in lab:
        path = lab.run_dir / "nodes" / node.name / kind.counters
        before[path] = path.stat().st_mtime_ns if path.exists() else 0
    for process in lab.processes(kind.daemon):
        # Our own unreaped children: their PIDs cannot have been reused.
        if process.poll() is None:
            os.kill(process.pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(path.exists() and path.stat().st_mtime_ns != mtime for path, mtime in before.items()):
            return
        time.sleep(0.01)
