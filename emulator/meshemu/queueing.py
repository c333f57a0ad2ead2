"""Queueing plug-in: what a topology's `queueing:` runs in a lab.

    queueing: fifo                                 # the default: no daemon, the radio's drop-tail queue
    queueing: fq                                   # bpd --mode fq (classify: source)
    queueing: {mode: fq, classify: destination}
    queueing: {mode: backpressure, classify: source, threshold: 1, knowledge: overhear}
    queueing: {mode: backpressure, threshold: 2, knowledge: oracle}

Any mode but fifo runs bpd (routing/backpressure) in every node once the
medium and the routing daemons are up (`start`), so the daemon, not the
interface queue, decides the order in which packets leave. bpd's iptables
rule is recorded with `record_iptables_rules` before it starts; the daemons
are started with `Node.spawn`, so `down` (and `meshemu cleanup`) stop them by
PID. With knowledge `overhear` (bpd's default in backpressure mode) every
node must be promiscuous: the topology makes it so (topology.py).

Per node, under `run_dir/nodes/<node>/`: `bpd.json` (counters, rewritten
when they change, at most every second, and at exit), `bpd.log`. The oracle's table: `run_dir/bpd-oracle`.
`stop(lab)` stops the daemons and returns their final counters; `summary`
and `source_counters` turn them into a run record's figures.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from . import medium
from .choices import BPD_QUEUE_NUM, QueueingChoice
from .errors import LabError
from .nodedaemons import Started, node_dir, wait_until_ready
from .pluginapi import PluginLab
from .state import IptablesRule, record_iptables_rules

CHOICE_FILE = "queueing.json"
PROGRAM = "bpd"
COUNTERS = "bpd.json"
LOG = "bpd.log"
ORACLE = "bpd-oracle"
STOP_TIMEOUT = 10.0  # seconds for every daemon to hand back its packets and write its last counters
# Per-flow counters a run record keeps (routing/backpressure/README.md, "Counters").
FLOW_COUNTERS = ("enqueued", "released", "dropped_limit", "dropped_full", "dropped_age", "held_packets",
                 "held_events", "held_ns")


def saved_choice(run_dir: Path) -> QueueingChoice:
    """The choice a lab was brought up with (fifo for labs without one)."""
    try:
        data = json.loads((run_dir / CHOICE_FILE).read_text())
        mode = data.pop("mode")
        return QueueingChoice(mode, data)
    except (FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):
        return QueueingChoice()


def rule() -> list[str]:
    """The iptables rule bpd adds in mangle POSTROUTING (routing/backpressure/README.md)."""
    return ["-o", "wlan0", "-j", "NFQUEUE", "--queue-num", str(BPD_QUEUE_NUM), "--queue-bypass"]


def start(lab: PluginLab) -> None:
    """Starts bpd in every node of the lab (unless the choice is fifo) and
    waits until each has written its counters; records the choice for
    `Lab.attach`."""
    choice: QueueingChoice = lab.queueing
    (lab.run_dir / CHOICE_FILE).write_text(json.dumps(choice.to_json()))
    if not choice.runs_daemon:
        return
    program = str(medium.find_program(PROGRAM))
    # Every node's rule in one update of the state, before any is added.
    record_iptables_rules(lab.run_dir, [IptablesRule(node.netns, "mangle", "POSTROUTING", rule()) for node in lab])
    started = []
    for node in lab:
        directory = node_dir(lab, node.name)
        counters = directory / COUNTERS
        counters.unlink(missing_ok=True)
        with open(directory / LOG, "wb") as log:
            process = node.spawn(choice.argv(program, counters, lab.run_dir / ORACLE), stderr=log)
        # bpd is ready once it has written its first counters.
        started.append(Started(node.name, process, counters, directory / LOG))
    wait_until_ready(started)


def counters(lab: PluginLab) -> dict[str, dict[str, Any]]:
    """bpd's counters of every node, as last written (at most a second old
    while the daemons run)."""
    result = {}
    for node in lab:
        try:
            result[node.name] = json.loads((lab.run_dir / "nodes" / node.name / COUNTERS).read_text())
        except (FileNotFoundError, ValueError):
            continue
    return result


def stop(lab: PluginLab) -> dict[str, dict[str, Any]]:
    """Stops the bpd processes this Lab object started (SIGTERM: each hands
    back the packets it holds, deletes its rule and writes its last
    counters) and returns those final counters per node."""
    daemons = [process for process in lab.processes(PROGRAM) if process.poll() is None]
    for process in daemons:
        process.terminate()  # our own unreaped child: its PID cannot have been reused
    deadline = time.monotonic() + STOP_TIMEOUT
    for process in daemons:
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    late = [p.node for p in daemons if p.poll() is None]
    if late:
        raise LabError(f"bpd did not stop within {STOP_TIMEOUT:.0f} s on {', '.join(late)}")
    return counters(lab)


def summary(choice: QueueingChoice, per_node: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A run record's `metrics.queueing`: the choice, the totals summed over
    nodes, and per bpd flow (source or destination address, next or previous
    hop) its counters summed over the nodes that queued it."""
    totals: dict[str, int] = {}
    flows: dict[str, dict[str, int]] = {}
    for node_counters in per_node.values():
        for key, value in node_counters["totals"].items():
            totals[key] = totals.get(key, 0) + value
        for flow in node_counters["flows"]:
            entry = flows.setdefault(flow["flow"], dict.fromkeys(FLOW_COUNTERS, 0))
            for key in FLOW_COUNTERS:
                entry[key] += flow[key]
    return {**choice.to_json(), "daemons": len(per_node), "totals": totals, "flows": dict(sorted(flows.items()))}


def source_counters(choice: QueueingChoice, per_node: dict[str, dict[str, Any]], src: str, src_ip: str,
                    dst_ip: str) -> dict[str, int] | None:
    """The counters of a traffic flow's class at its source node: `released`
    there is what the source injected into the network. None when the class
    is not the traffic flow's own (next-hop, previous-hop)."""
    key = {"source": src_ip, "destination": dst_ip}.get(choice.options.get("classify", "source"))
    node_counters = per_node.get(src)
    if key is None or node_counters is None:
        return None
    for flow in node_counters["flows"]:
        if flow["flow"] == key:
            return {name: flow[name] for name in FLOW_COUNTERS}
    return None
