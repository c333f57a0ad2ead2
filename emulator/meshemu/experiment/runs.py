"""Planned runs: what experiment/plan.py makes of an experiment file and the
drivers (the lab, ns-2, the sim) carry out. Apart from the planner, so the
drivers' support checks and scenario writers that the planner calls can
name a run without importing it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from ..topology import Topology

# Who carries out the runs: a real-time lab, ns-2.35 (meshemu/ns2/), or the
# model in virtual time (meshemu/sim/).
LAB = "lab"
NS2 = "ns2"
SIM = "sim"
DRIVERS = (LAB, NS2, SIM)


@dataclass(frozen=True)
class Flow:
    """One resolved traffic entry of a run. Times in ns from the run's start."""

    name: str
    kind: str  # tcp | udp | tfrc | command
    src: str | None  # node names (command: the node in src)
    dst: str | None
    hops: int | None  # at time 0, over links that work both ways; None: unreachable
    start_ns: int
    stop_ns: int
    port: int | None
    options: dict[str, Any] = field(default_factory=dict)  # kind-specific, resolved units
    group: str | None = None  # the traffic entry's name when it made one flow per sender (src: all)

    def as_json(self) -> dict[str, Any]:
        # The group only when there is one, so runs without keep their ids.
        return {"name": self.name, "kind": self.kind, "src": self.src, "dst": self.dst, "hops": self.hops,
                "start_ns": self.start_ns, "stop_ns": self.stop_ns, "port": self.port, "options": self.options,
                **({"group": self.group} if self.group else {})}

    def record(self) -> dict[str, Any]:
        """What every driver's record of the flow starts with."""
        return {"name": self.name, "kind": self.kind, "src": self.src, "dst": self.dst, "hops": self.hops,
                **({"group": self.group} if self.group else {})}


@dataclass(frozen=True)
class Run:
    params: dict[str, Any]  # sweep path -> the value as written
    choices: dict[str, int]
    seed: int
    topology: Topology
    flows: tuple[Flow, ...]
    duration_ns: int
    warmup_ns: int
    measure: dict[str, Any]
    sysctl: dict[str, dict[str, str]]  # node -> {key: value}
    routes_quickack: tuple[str, ...]  # nodes whose routes get quickack (delayed ACKs off)
    driver: str = LAB

    @property
    def config(self) -> dict[str, Any]:
        """Everything that determines the run (JSON-ready)."""
        return {
            "medium": self.topology.medium,
            "routing": self.topology.lab_routing,
            # Only when a daemon routes, so runs with static routes keep their ids.
            **({"routing_daemon": self.topology.routing_choice.to_json()}
               if self.topology.routing_choice.kind.daemon is not None else {}),
            "nodes": [{"name": node.name, "ipv4": str(node.ipv4)} for node in self.topology.nodes],
            "duration_ns": self.duration_ns,
            "warmup_ns": self.warmup_ns,
            "traffic": [flow.as_json() for flow in self.flows],
            "measure": self.measure,
            "sysctl": self.sysctl,
            "quickack": list(self.routes_quickack),
            # Only when a daemon queues, so runs without one keep their ids.
            **({"queueing": self.topology.queueing.to_json()} if self.topology.queueing.runs_daemon else {}),
            # Only when not the kernel's own, so runs with it keep their ids.
            **({"arp": self.topology.arp} if self.topology.arp != "kernel" else {}),
        }

    @property
    def run_id(self) -> str:
        """A stable hash of the swept values, the seed and the resolved
        configuration (and the driver, unless it is the lab, so lab runs keep
        their ids): the same run has the same id on every machine."""
        driver = {} if self.driver == LAB else {"driver": self.driver}
        text = json.dumps({"params": self.params, "seed": self.seed, "config": self.config, **driver}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def label(self) -> str:
        parts = [f"{short_name(path, list(self.params))}={value}" for path, value in self.params.items()]
        return " ".join(parts + [f"seed={self.seed}"])


def short_name(path: str, paths: list[str]) -> str:
    """The last part of a sweep path (of its first path when it sets
    several), or the whole path when that is ambiguous."""

    def last(text: str) -> str:
        return text.split(",")[0].rsplit(".", 1)[-1]

    return last(path) if sum(last(other) == last(path) for other in paths) == 1 else path
