"""A topology's routing and queueing choices: what the configuration layer
resolves `routing:` and `queueing:` to (JSON-ready, units as the daemons
take them). The plug-ins that run a choice in a lab are routing.py and
queueing.py; the planners (experiment/plan.py, simfile.py, the ns-2 and sim
support checks) read these choices without importing a runtime module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .schema import AodvRouting, BabeldRouting, CopasRouting, QueueingOptions

# --- routing --------------------------------------------------------------------------

# Routing choices whose routes a daemon installs, and those of them that can
# mark every route with quickack themselves.
DAEMON_ROUTING = ("aodv", "babeld", "copas")
QUICKACK_DAEMONS = ("aodv", "copas")
# Routing choices that are ns-2 agents with no daemon of ours: only the ns-2
# driver runs them.
NS2_ONLY_ROUTING = ("dsr", "dsdv")

# Topology option -> aodvd [aodv] key and the factor from the schema's unit (ns for times).
_AODV_KEYS = {
    "hello_interval": ("hello_interval_ms", 1e-6),
    "active_route_timeout": ("active_route_timeout_ms", 1e-6),
    "node_traversal_time": ("node_traversal_time_ms", 1e-6),
    "broadcast_jitter": ("broadcast_jitter_ms", 1e-6),
    "link_feedback_poll": ("link_feedback_poll_ms", 1e-6),
}

_COPAS_DURATIONS = {"t_backoff", "t_collect", "probe_interval", "probe_idle", "active_route_timeout",
                    "discovery_timeout", "broadcast_jitter", "reroute_hold", "route_ack_timeout", "silent_hold"}


@dataclass(frozen=True)
class RoutingChoice:
    """A topology's routing: the name and the daemon's settings (aodvd's
    [aodv] keys, or babeld's interface options)."""

    name: str  # static | none | aodv | babeld | copas | dsr | dsdv
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def lab_routing(self) -> str:
        """LAB.json's `routing`: daemons own the routes, the medium installs none."""
        return "static" if self.name == "static" else "none"

    @property
    def ipv6_link_local(self) -> bool:
        return self.name == "babeld"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "options": self.options}


def routing_choice_of(spec: Any) -> RoutingChoice:
    """The schema's `routing` value as a choice with daemon-ready settings."""
    if isinstance(spec, str):
        return RoutingChoice(spec)
    if isinstance(spec, AodvRouting):
        options = {}
        for key, value in spec.aodv.model_dump(exclude_none=True).items():
            name, factor = _AODV_KEYS.get(key, (key, None))
            options[name] = round(value * factor) if factor is not None else value
        return RoutingChoice("aodv", options)
    if isinstance(spec, CopasRouting):
        # Durations (ns in the schema) go to copasd's *_ms keys.
        options = {}
        for key, value in spec.copas.model_dump(exclude_none=True).items():
            duration = key in _COPAS_DURATIONS
            options[f"{key}_ms" if duration else key] = round(value * 1e-6) if duration else value
        return RoutingChoice("copas", options)
    if isinstance(spec, BabeldRouting):
        options = {key: value / 1e9 for key, value in spec.babeld.model_dump(exclude_none=True).items()}
        return RoutingChoice("babeld", options)
    raise TypeError(f"not a routing spec: {spec!r}")


def only_in_ns2(name: str) -> str:
    """Why a lab cannot run an ns-2-only routing choice."""
    return (f"routing: {name} is ns-2's {name.upper()} agent, which has no daemon in meshemu: only ns-2 runs it "
            "(meshemu run FILE --driver ns2)")


# --- queueing -------------------------------------------------------------------------

BPD_QUEUE_NUM = 0
# bpd forgets a flow idle this long, with its per-flow counters: in a lab keep
# them for the lab's life, so that a run's final counters name every flow.
BPD_FLOW_IDLE = "3600s"
# Schema key -> bpd option; durations (ns) are passed as "<n>ns".
_BPD_OPTIONS = {
    "classify": "--classify",
    "threshold": "--threshold",
    "flow_limit": "--flow-limit",
    "total_limit": "--total-limit",
    "knowledge": "--knowledge",
    "beacon_period": "--beacon-period",
    "overhear_timeout": "--overhear-timeout",
    "radio_depth": "--radio-depth",
    "max_hold": "--max-hold",
}
_BPD_DURATIONS = {"beacon_period", "overhear_timeout", "max_hold"}


@dataclass(frozen=True)
class QueueingChoice:
    """A topology's queueing: bpd's mode and the options given (schema
    names, durations in ns); bpd's defaults fill the rest."""

    mode: str = "fifo"
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def runs_daemon(self) -> bool:
        return self.mode != "fifo"

    @property
    def knowledge(self) -> str | None:
        return self.options.get("knowledge", "overhear") if self.mode == "backpressure" else None

    @property
    def overhears(self) -> bool:
        """Whether bpd listens to its neighbours' transmissions (nodes must be promiscuous)."""
        return self.knowledge == "overhear"

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, **self.options}

    def argv(self, program: str, counters: Path, oracle: Path) -> list[str]:
        """bpd's arguments in one node."""
        argv = [program, "--mode", self.mode, "--queue-num", str(BPD_QUEUE_NUM), "--flow-idle", BPD_FLOW_IDLE,
                "--counters", str(counters)]
        for key, value in self.options.items():
            argv += [_BPD_OPTIONS[key], f"{value}ns" if key in _BPD_DURATIONS else str(value)]
        if self.knowledge == "oracle":
            argv += ["--oracle", str(oracle)]
        return argv


def queueing_choice_of(spec: QueueingOptions) -> QueueingChoice:
    """The schema's `queueing` value as a choice."""
    options = spec.model_dump(exclude_none=True)
    return QueueingChoice(options.pop("mode"), options)
