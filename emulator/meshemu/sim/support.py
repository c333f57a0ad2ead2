"""What the sim driver can run, checked when the file is planned: every
setting the model in virtual time cannot carry out is refused, naming the
key where it is written, before anything runs (a run that silently left a
setting out would compare different things). As with ns-2, a run with such
a setting is skipped with the reason, so a study's other cases still run;
a plan with no run left is an error.

Refused, and why:
- routing other than static: the sim routes every flow over static
  minimum-hop routes at time 0 (aodv, babeld and copas are daemons that run
  in labs; dsr and dsdv are ns-2's agents; none leaves a lab without routes);
- tcp, tfrc and command traffic: the sim's traffic is synthetic packets at a
  constant bit rate; it runs no TCP, no TFRC and no programs;
- queueing daemons (bpd), `sysctl`, `backend: hwsim`: programs, kernels and
  radios of a lab's nodes;
- lab measurements that add metrics: `measure.capture` (the TCP senders'
  data/ACK events) and `measure.sim_reference` (the sim's goodput beside a
  lab's: here it would be the run itself). `measure.stats_interval` and
  `measure.view` only add a time series of a lab's counters and a
  recording for `meshemu view` and are ignored, as is
  `measure.drain` (the sim stops at the run's end: sim/scenario.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Problem
from ..choices import ROUTING_KINDS
from ..source import DataPath, Document

if TYPE_CHECKING:
    from ..experiment.runs import Flow
    from ..experiment.spec import ExperimentSpec
    from ..topology import Topology

def unsupported(document: Document, spec: "ExperimentSpec", topology: "Topology",
                flows: tuple["Flow", ...]) -> list[Problem]:
    """Every setting of one planned run that the sim cannot carry out."""
    problems: list[Problem] = []

    def refuse(path: DataPath, message: str) -> None:
        problem = document.problem(path, message)
        if problem not in problems:
            problems.append(problem)

    routing = topology.routing_choice.name
    if routing != "static":
        refuse(("topology", "routing"), f"the sim driver routes every flow statically (minimum hops at time 0): "
                                        f"use routing: static (routing {routing} runs {_where(routing)})")
    if topology.backend["kind"] != "tap":
        refuse(("topology", "backend"), "mac80211_hwsim radios belong to a lab (the sim is the model itself): "
                                        "remove backend for --driver sim")
    if topology.queueing.runs_daemon:
        refuse(("topology", "queueing"), "bpd is a daemon that runs in labs only; the sim's nodes queue in their "
                                         "interface queue (queueing: fifo)")
    if spec.sysctl:
        refuse(("sysctl",), "sysctl sets the Linux kernels of a lab's nodes; the sim's nodes have none")
    for key in ("capture", "sim_reference"):
        if getattr(spec.measure, key):
            refuse(("measure", key), f"measure.{key} adds metrics of labs (a capture of the TCP senders, the "
                                     "sim's goodput beside a lab's) that the sim driver does not produce")
    # One flow per traffic entry, in order.
    for index, flow in enumerate(flows):
        if flow.kind != "udp":
            refuse(("traffic", index, "kind"), f"a {flow.kind} flow {_traffic_needs(flow.kind)}; the sim runs udp "
                                               "flows (constant bit rate)")
    return problems


def _where(routing: str) -> str:
    if ROUTING_KINDS[routing].ns2_only:
        return "in ns-2 only: --driver ns2"
    if routing == "aodv":  # aodvd in labs, ns-2's own AODV in ns-2
        return "in labs and in ns-2: --driver lab or ns2"
    return "in labs: --driver lab"


def _traffic_needs(kind: str) -> str:
    return {"tcp": "needs a TCP stack (a lab's kernel, or ns-2's agents: --driver ns2)",
            "tfrc": "is our TFRC tool, which runs in labs only",
            "command": "runs a program in a lab's node"}[kind]
