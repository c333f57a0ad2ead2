"""A topology's routing and queueing choices: what the configuration layer
resolves `routing:` and `queueing:` to (JSON-ready, units as the daemons
take them), and the kinds behind them: one class per value of `routing:`
(`RoutingKind`, listed in `ROUTING_KINDS`) and per queueing mode
(`QueueingKind`, in `QUEUEING_KINDS`). A kind says everything about its
value: what LAB.json asks of the medium, which drivers can run it, and the
daemon it runs in every node of a lab (program, files, command line,
counters). The runtime (routing.py, queueing.py) starts what the kind
describes, without a branch of its own per kind; the planners
(experiment/plan.py, simfile.py, the ns-2 and sim support checks) read the
kinds without importing a runtime module.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from . import medium
from .errors import LabError
from .schema import QueueingOptions

# --- routing --------------------------------------------------------------------------


class RoutingKind:
    """One value of `routing:`. Without a daemon: the medium's static routes
    or none. A subclass that runs a daemon sets `daemon` and the files below
    and describes the daemon's files and command line; routing.py writes
    them in `run_dir/nodes/<node>/`, starts the daemon with `Node.spawn` and
    waits for `ready_file`."""

    name: ClassVar[str]
    lab_routing: ClassVar[str] = "none"  # LAB.json's routing: static, or none (a daemon owns the routes)
    ipv6_link_local: ClassVar[bool] = False  # whether the medium leaves IPv6 link-local on
    ns2_only: ClassVar[bool] = False  # an ns-2 agent with no daemon of ours: only the ns-2 driver runs it
    marks_quickack: ClassVar[bool] = False  # the daemon sets quickack 1 on every route it installs (`quickack`)

    daemon: ClassVar[str | None] = None  # the program in every node
    log: ClassVar[str]  # the daemon's stderr, per node
    ready_file: ClassVar[str]  # exists once the daemon is up
    counters: ClassVar[str | None] = None  # its counters (`overhead_bytes`, `overhead_packets`), if it writes any
    events: ClassVar[str | None] = None  # its route and discovery events, if it writes any
    prints_rules: ClassVar[bool] = False  # `--print-rules` lists the iptables rules it will add (as JSON)

    @staticmethod
    def daemon_options(settings: dict[str, Any]) -> dict[str, Any]:
        """The schema's settings of `{name: {...}}` (durations in ns) as the daemon takes them."""
        return settings

    @classmethod
    def program(cls) -> str:
        """The daemon's path; a clear error when it is missing."""
        raise NotImplementedError

    @classmethod
    def node_files(cls, options: dict[str, Any], directory: Path, lab_seed: int, index: int) -> dict[str, str]:
        """The files the daemon of node `index` reads, by name in its `directory`."""
        raise NotImplementedError

    @classmethod
    def argv(cls, program: str, directory: Path) -> list[str]:
        """The daemon's command line in the node whose files are in `directory`."""
        raise NotImplementedError


class Static(RoutingKind):
    """The medium installs minimum-hop routes at time 0."""

    name = "static"
    lab_routing = "static"


class NoRoutes(RoutingKind):
    """No routes beyond the subnet."""

    name = "none"


# Options that belong to an on-demand daemon's [daemon] table, not the
# protocol's: `quickack` (every route it installs gets quickack 1), which
# experiments set when a TCP flow asks for delayed ACKs off, and
# `link_feedback_poll_ms` (how often it reads the radio page for failed frames).
ONDEMAND_DAEMON_KEYS = ("quickack", "link_feedback_poll_ms")


class OnDemandRouting(RoutingKind):
    """A daemon of routing/ built on the on-demand platform (aodvd, copasd):
    one TOML file with the protocol's table (named as the routing) and the
    platform's [daemon] table, iptables rules it lists with --print-rules,
    counters it rewrites (at most every second, on SIGUSR1 and at exit), its
    events as JSON lines with `mono_ns` timestamps."""

    prints_rules = True
    marks_quickack = True

    @classmethod
    def program(cls) -> str:
        assert cls.daemon is not None
        return str(medium.find_program(cls.daemon))

    @classmethod
    def config_file(cls) -> str:
        return f"{cls.daemon}.toml"

    @classmethod
    def node_files(cls, options: dict[str, Any], directory: Path, lab_seed: int, index: int) -> dict[str, str]:
        assert cls.counters is not None and cls.events is not None
        seed = lab_seed * 1_000_003 + index
        protocol = {key: value for key, value in options.items() if key not in ONDEMAND_DAEMON_KEYS}
        daemon = {key: value for key, value in options.items() if key in ONDEMAND_DAEMON_KEYS}
        lines = [f"[{cls.name}]"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in sorted(protocol.items())]
        lines += ["", "[daemon]", 'interface = "wlan0"', f"seed = {seed % 2**63}",
                  f"counters = {json.dumps(str(directory / cls.counters))}",
                  f"events = {json.dumps(str(directory / cls.events))}"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in sorted(daemon.items())]
        return {cls.config_file(): "\n".join(lines) + "\n"}

    @classmethod
    def argv(cls, program: str, directory: Path) -> list[str]:
        return [program, "--config", str(directory / cls.config_file())]


# Topology option -> aodvd [aodv] key and the factor from the schema's unit (ns for times).
def _durations_in_ms(settings: dict[str, Any], durations: set[str]) -> dict[str, Any]:
    """A daemon's options: the durations among `settings` (ns in the schema) as its `*_ms` keys."""
    return {(f"{key}_ms" if key in durations else key): (round(value * 1e-6) if key in durations else value)
            for key, value in settings.items()}


_AODV_DURATIONS = {"hello_interval", "active_route_timeout", "node_traversal_time", "broadcast_jitter",
                   "release_spacing", "link_feedback_poll"}


class Aodv(OnDemandRouting):
    """aodvd (routing/aodv) in every node."""

    name = "aodv"
    daemon = "aodvd"
    log = "aodvd.log"
    ready_file = counters = "aodv.json"
    events = "aodv-events.jsonl"

    @staticmethod
    def daemon_options(settings: dict[str, Any]) -> dict[str, Any]:
        return _durations_in_ms(settings, _AODV_DURATIONS)


_COPAS_DURATIONS = {"t_backoff", "t_collect", "probe_interval", "probe_idle", "active_route_timeout",
                    "discovery_timeout", "broadcast_jitter", "reroute_hold", "route_ack_timeout", "silent_hold"}


class Copas(OnDemandRouting):
    """copasd (routing/copas) in every node."""

    name = "copas"
    daemon = "copasd"
    log = "copasd.log"
    ready_file = counters = "copas.json"
    events = "copas-events.jsonl"

    @staticmethod
    def daemon_options(settings: dict[str, Any]) -> dict[str, Any]:
        return _durations_in_ms(settings, _COPAS_DURATIONS)


class Babeld(RoutingKind):
    """Debian's babeld, unmodified, in every node: `babeld.conf` (the
    interface's options), `babeld.pid` once it is up, `babeld.state`; it
    counts no control traffic and speaks IPv6 link-local."""

    name = "babeld"
    ipv6_link_local = True
    daemon = "babeld"
    log = "babeld.log"
    ready_file = "babeld.pid"

    @staticmethod
    def daemon_options(settings: dict[str, Any]) -> dict[str, Any]:
        return {key: value / 1e9 for key, value in settings.items()}  # seconds

    @classmethod
    def program(cls) -> str:
        program = shutil.which("babeld")
        if program is None:
            raise LabError("routing: babeld needs the babeld program (Debian package babeld): apt-get install babeld")
        return program

    @classmethod
    def node_files(cls, options: dict[str, Any], directory: Path, lab_seed: int, index: int) -> dict[str, str]:
        interface = ["interface wlan0 type wireless"]
        for key, word in (("hello_interval", "hello-interval"), ("update_interval", "update-interval")):
            if key in options:
                interface.append(f"{word} {options[key]:g}")
        return {"babeld.conf": " ".join(interface) + "\n"}

    @classmethod
    def argv(cls, program: str, directory: Path) -> list[str]:
        return [program, "-c", str(directory / "babeld.conf"), "-I", str(directory / cls.ready_file),
                "-S", str(directory / "babeld.state"), "wlan0"]


class Ns2Agent(RoutingKind):
    """An ns-2 agent with no daemon in meshemu: `meshemu run --driver ns2` only."""

    ns2_only = True


class Dsr(Ns2Agent):
    name = "dsr"


class Dsdv(Ns2Agent):
    name = "dsdv"


# Every value of `routing:` (schema.RoutingSpec spells the same names).
ROUTING_KINDS: dict[str, type[RoutingKind]] = {
    kind.name: kind for kind in (Static, NoRoutes, Aodv, Babeld, Copas, Dsr, Dsdv)}


@dataclass(frozen=True)
class RoutingChoice:
    """A topology's routing: the kind's name and its daemon's settings
    (aodvd's [aodv] keys, or babeld's interface options)."""

    name: str  # a key of ROUTING_KINDS
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> type[RoutingKind]:
        return ROUTING_KINDS[self.name]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "options": self.options}


def routing_choice_of(spec: Any) -> RoutingChoice:
    """The schema's `routing` value (a name, or a model whose one field is
    named after the kind) as a choice with daemon-ready settings."""
    if isinstance(spec, str):
        return RoutingChoice(spec)
    (name,) = type(spec).model_fields
    return RoutingChoice(name, ROUTING_KINDS[name].daemon_options(getattr(spec, name).model_dump(exclude_none=True)))


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


class QueueingKind:
    """One value of `queueing:`'s mode. Every mode but fifo runs bpd
    (routing/backpressure) in every node with `--mode` set to it (queueing.py)."""

    mode: ClassVar[str]
    runs_daemon: ClassVar[bool] = True

    @staticmethod
    def knowledge(options: dict[str, Any]) -> str | None:
        """What bpd knows of its neighbours' queues (backpressure only)."""
        return None


class Fifo(QueueingKind):
    """The default: no daemon, the radio's drop-tail queue."""

    mode = "fifo"
    runs_daemon = False


class FairQueueing(QueueingKind):
    """bpd --mode fq: one queue per flow of `classify`, served round-robin."""

    mode = "fq"


class Backpressure(QueueingKind):
    """bpd --mode backpressure: fq where a flow's head packet waits while its next hop holds
    `threshold` or more packets of the flow."""

    mode = "backpressure"

    @staticmethod
    def knowledge(options: dict[str, Any]) -> str | None:
        return options.get("knowledge", "overhear")


# Every mode of `queueing:` (schema.QueueingOptions spells the same names).
QUEUEING_KINDS: dict[str, type[QueueingKind]] = {kind.mode: kind for kind in (Fifo, FairQueueing, Backpressure)}


@dataclass(frozen=True)
class QueueingChoice:
    """A topology's queueing: bpd's mode and the options given (schema
    names, durations in ns); bpd's defaults fill the rest."""

    mode: str = "fifo"  # a key of QUEUEING_KINDS
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> type[QueueingKind]:
        return QUEUEING_KINDS[self.mode]

    @property
    def runs_daemon(self) -> bool:
        return self.kind.runs_daemon

    @property
    def knowledge(self) -> str | None:
        return self.kind.knowledge(self.options)

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
