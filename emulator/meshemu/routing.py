"""Routing plug-ins: what a topology's `routing:` runs in a lab.

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

A choice (choices.py, resolved with the topology) maps to (a) the `routing`
of LAB.json (`static`, or `none` when a daemon owns the routes) and whether
the medium leaves IPv6 link-local on, and (b) the daemons `start(lab)` runs in every node once the medium is ready:
their argument lists, the files they get, how to tell they are ready and
where their counters are. Daemons are started with `Node.spawn` (recorded in
the lab state, stopped by PID at down); iptables rules a daemon adds are
recorded with `record_iptables_rule` before it starts, so `meshemu cleanup`
removes them after a crash.

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

from . import medium
from .choices import RoutingChoice
from .errors import LabError
from .pluginapi import PluginLab, PluginNode, PluginProcess
from .state import IptablesRule, record_iptables_rule

CHOICE_FILE = "routing.json"
AODV_PROGRAM = "aodvd"
AODV_COUNTERS = "aodv.json"
AODV_EVENTS = "aodv-events.jsonl"
BABELD_PROGRAM = "babeld"
COPAS_PROGRAM = "copasd"
COPAS_COUNTERS = "copas.json"
COPAS_EVENTS = "copas-events.jsonl"
# The on-demand daemons of routing/ (one platform, one config layout):
# choice name (also the protocol's config table) -> program, counters, events.
_ONDEMAND = {"aodv": (AODV_PROGRAM, AODV_COUNTERS, AODV_EVENTS),
             "copas": (COPAS_PROGRAM, COPAS_COUNTERS, COPAS_EVENTS)}
READY_TIMEOUT = 20.0  # seconds for every daemon of a lab to come up

# Options that belong to aodvd's [daemon] table, not the protocol's [aodv]:
# `quickack` (every route it installs gets quickack 1), which experiments
# set when a TCP flow asks for delayed ACKs off, and `link_feedback_poll`
# (how often it reads the radio page for failed frames).
AODV_DAEMON_KEYS = ("quickack", "link_feedback_poll_ms")


def saved_choice(run_dir: Path) -> RoutingChoice:
    """The choice a lab was brought up with (static for labs without one)."""
    try:
        data = json.loads((run_dir / CHOICE_FILE).read_text())
        return RoutingChoice(data["name"], data["options"])
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return RoutingChoice("static")


def node_dir(lab: PluginLab, node: PluginNode) -> Path:
    path = lab.run_dir / "nodes" / node.name
    path.mkdir(parents=True, exist_ok=True)
    return path


# --- aodvd, copasd --------------------------------------------------------------------


def _ondemand_config(lab: PluginLab, node: PluginNode, options: dict[str, Any], name: str) -> Path:
    program, counters_file, events_file = _ONDEMAND[name]
    directory = node_dir(lab, node)
    seed = int(lab.config["medium"]["seed"]) * 1_000_003 + node.index
    protocol = {key: value for key, value in options.items() if key not in AODV_DAEMON_KEYS}
    daemon = {key: value for key, value in options.items() if key in AODV_DAEMON_KEYS}
    lines = [f"[{name}]"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in sorted(protocol.items())]
    lines += ["", "[daemon]", 'interface = "wlan0"', f"seed = {seed % 2**63}",
              f"counters = {json.dumps(str(directory / counters_file))}",
              f"events = {json.dumps(str(directory / events_file))}"]
    lines += [f"{key} = {json.dumps(value)}" for key, value in sorted(daemon.items())]
    path = directory / f"{program}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _start_ondemand(lab: PluginLab, options: dict[str, Any], name: str) -> None:
    name_of_program, counters_file, _ = _ONDEMAND[name]
    program = str(medium.find_program(name_of_program))
    logs = []
    for node in lab:
        config = _ondemand_config(lab, node, options, name)
        argv = [program, "--config", str(config)]
        listing = node.run(argv + ["--print-rules"], timeout=10)
        if listing.returncode != 0:
            raise LabError(f"{name_of_program} refused its configuration on {node.name}: {listing.stderr.strip()}")
        for rule in json.loads(listing.stdout):
            record_iptables_rule(lab.run_dir, IptablesRule(node.netns, rule["table"], rule["chain"], rule["rule"]))
        (node_dir(lab, node) / counters_file).unlink(missing_ok=True)
        log = open(node_dir(lab, node) / f"{name_of_program}.log", "wb")
        logs.append(log)
        process = node.spawn(argv, stderr=log)
        _wait_for(lab, node, process, node_dir(lab, node) / counters_file, f"{name_of_program}.log")
    for log in logs:
        log.close()


# --- babeld ---------------------------------------------------------------------------


def _start_babeld(lab: PluginLab, options: dict[str, Any]) -> None:
    program = shutil.which(BABELD_PROGRAM)
    if program is None:
        raise LabError("routing: babeld needs the babeld program (Debian package babeld): apt-get install babeld")
    interface = ["interface wlan0 type wireless"]
    for key, word in (("hello_interval", "hello-interval"), ("update_interval", "update-interval")):
        if key in options:
            interface.append(f"{word} {options[key]:g}")
    for node in lab:
        directory = node_dir(lab, node)
        (directory / "babeld.conf").write_text(" ".join(interface) + "\n")
        pid_file = directory / "babeld.pid"
        pid_file.unlink(missing_ok=True)
        argv = [program, "-c", str(directory / "babeld.conf"), "-I", str(pid_file),
                "-S", str(directory / "babeld.state"), "wlan0"]
        with open(directory / "babeld.log", "wb") as log:
            process = node.spawn(argv, stderr=log)
        _wait_for(lab, node, process, pid_file, "babeld.log")


def _wait_for(lab: PluginLab, node: PluginNode, process: PluginProcess, ready_file: Path, log_name: str) -> None:
    """Until `ready_file` exists; a daemon that exits first is an error with its log."""
    deadline = time.monotonic() + READY_TIMEOUT
    while not ready_file.exists():
        status = process.poll()
        if status is not None or time.monotonic() > deadline:
            log = node_dir(lab, node) / log_name
            tail = log.read_text(errors="replace").strip()[-1500:] if log.exists() else ""
            what = f"exited with status {status}" if status is not None else f"was not ready after {READY_TIMEOUT:.0f} s"
            raise LabError(f"{Path(process.argv[0]).name} on {node.name} {what}: {tail or '(no output)'}")
        time.sleep(0.01)


_STARTERS = {"aodv": lambda lab, options: _start_ondemand(lab, options, "aodv"),
             "copas": lambda lab, options: _start_ondemand(lab, options, "copas"),
             "babeld": _start_babeld}


def start(lab: PluginLab) -> None:
    """Starts the routing daemons of `lab.routing` in every node (after the
    medium is ready) and records the choice for `Lab.attach`."""
    choice: RoutingChoice = lab.routing
    (lab.run_dir / CHOICE_FILE).write_text(json.dumps(choice.to_json()))
    starter = _STARTERS.get(choice.name)
    if starter is not None:
        starter(lab, choice.options)


# --- counters -------------------------------------------------------------------------


def _counters_file(lab: PluginLab) -> str:
    return _ONDEMAND.get(lab.routing.name, _ONDEMAND["aodv"])[1]


def counters(lab: PluginLab) -> dict[str, dict[str, Any]]:
    """aodvd's (or copasd's) counters of every node (routing/aodv/README.md,
    "Counters"), as last written (at most a second old; see `refresh_counters`)."""
    result = {}
    for node in lab:
        path = lab.run_dir / "nodes" / node.name / _counters_file(lab)
        try:
            result[node.name] = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            continue
    return result


def control_overhead(lab: PluginLab) -> tuple[int, int] | None:
    """Routing control traffic every daemon of the lab sent: (IP bytes,
    packets). (0, 0) for static and no routing; None when the daemon does
    not count it (babeld)."""
    choice: RoutingChoice = lab.routing
    if choice.name in ("static", "none"):
        return (0, 0)
    if choice.name not in _ONDEMAND:
        return None
    refresh_counters(lab)
    totals = [(c["overhead_bytes"], c["overhead_packets"]) for c in counters(lab).values()]
    return (sum(b for b, _ in totals), sum(p for _, p in totals))


def save_outputs(lab: PluginLab, directory: Path) -> list[Path]:
    """Copies what the routing daemons wrote about the run (aodvd, copasd:
    events and counters of every node) to `directory` as
    `<node>.aodv-events.jsonl` and `<node>.aodv.json` (copas-events, copas),
    before the lab's run directory goes away."""
    saved = []
    for node in lab:
        for name in (AODV_EVENTS, AODV_COUNTERS, COPAS_EVENTS, COPAS_COUNTERS):
            source = lab.run_dir / "nodes" / node.name / name
            if source.exists():
                directory.mkdir(parents=True, exist_ok=True)
                target = directory / f"{node.name}.{name}"
                shutil.copyfile(source, target)
                saved.append(target)
    return saved


def refresh_counters(lab: PluginLab, timeout: float = 2.0) -> None:
    """Asks the aodvd (copasd) processes this Lab object started for fresh
    counters (SIGUSR1) and waits until their files were rewritten."""
    before = {}
    for node in lab:
        path = lab.run_dir / "nodes" / node.name / _counters_file(lab)
        before[path] = path.stat().st_mtime_ns if path.exists() else 0
    for process in lab.processes(AODV_PROGRAM) + lab.processes(COPAS_PROGRAM):
        # Our own unreaped children: their PIDs cannot have been reused.
        if process.poll() is None:
            os.kill(process.pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(path.exists() and path.stat().st_mtime_ns != mtime for path, mtime in before.items()):
            return
        time.sleep(0.01)
