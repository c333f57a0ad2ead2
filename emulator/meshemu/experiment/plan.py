"""Experiment files -> runs: every sweep point with every seed, each with its
resolved topology and traffic, all validated before anything starts.

Traffic endpoints given as `random` or as a `pair` are chosen here from the
run's seed (a stream per traffic entry), over the nodes that reach each other
at time 0, so a run is the same whenever and wherever it is planned.

A run whose TCP congestion control is a Linux module this kernel does not
offer (vegas, westwood, ... on a kernel built without them) is skipped, with
the reason, while other runs remain: a study names every variant and runs
what the machine has (and the rest where the kernel has them). A name that is
no Linux congestion control at all is an error, as is a plan with no run left.

A plan is for one driver: `lab` (real time, the default), `ns2` (the file
translated into an ns-2.35 scenario, meshemu/ns2/) or `sim` (the model in
virtual time, meshemu/sim/). A run with a setting the driver cannot
reproduce is skipped in the same way, naming the setting where it is written
(ns2/support.py, sim/support.py), so a study's other cases still run there;
a lab skips the runs of routing only ns-2 has (dsr, dsdv) in the same way,
so one file can set ns-2's DSR beside AODV in both substrates.
"""

from __future__ import annotations

import dataclasses
import json
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .. import medium
from ..errors import ConfigError, Problem
from ..medium import LinksFunction
from ..ns2 import support as ns2_support
from ..sim import support as sim_support
from ..choices import ROUTING_KINDS, only_in_ns2
from ..schema import StrictModel
from ..source import DataPath, Document, Mark, load_yaml, parse_yaml, pydantic_problems
from ..sweep import expand, inline_topology_file, seeds_of, sweep_paths
from ..topology import Topology, resolution_key, resolve_mac, resolve_topology
from .runs import DRIVERS, LAB, NS2, SIM, Flow, Run
from .spec import CommandTraffic, Contenders, ExperimentSpec, TcpTraffic, TfrcTraffic, UdpTraffic

AVAILABLE_CC = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
# The congestion controls of the Linux source tree (net/ipv4/tcp_*.c); a
# kernel offers those it was built with.
LINUX_CONGESTION_CONTROLS = frozenset({
    "bbr", "bic", "cdg", "cubic", "dctcp", "highspeed", "htcp", "hybla", "illinois", "lp", "nv", "reno",
    "scalable", "vegas", "veno", "westwood", "yeah"})
FIRST_PORT = 5201
NS = 1_000_000_000
# What each virtual-time driver cannot carry out, per planned run.
UNSUPPORTED = {NS2: ns2_support.unsupported, SIM: sim_support.unsupported}
# Minimum hops between every two nodes at time 0 (None: no path), see hop_counts.
HopCounts = list[list[int | None]]


@dataclass(frozen=True)
class Skipped:
    """A run the driver cannot carry out (a lab: its congestion control is
    not in this kernel, or its routing is ns-2's only; ns-2, the sim: a
    setting they have no equivalent for), with the reason."""

    params: dict[str, Any]
    seed: int
    reason: str
    kernel: bool = False  # what is missing is a module of this kernel (another kernel, the VM's, has it)


class _Unavailable(Exception):
    """The run needs what this kernel lacks; `problems` say what."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems


class NothingRunsHere(ConfigError):
    """The file is fine, but the driver cannot carry out any of its runs
    here (a lab: every run needs a congestion control this kernel lacks):
    `skipped` says why, run by run."""

    def __init__(self, problems: list[Problem], skipped: list[Skipped]):
        super().__init__(problems)
        self.skipped = skipped


@dataclass(frozen=True)
class Plan:
    file: str
    name: str  # the results directory's name: the file's stem
    description: str | None
    sweep_paths: list[str]
    runs: list[Run]
    skipped: list[Skipped] = field(default_factory=list)


def is_experiment_file(document: Document) -> bool:
    return isinstance(document.data, dict) and "traffic" in document.data


def load_experiment(path: str | Path, *, overrides: list[str] = (), scale: str | None = None,
                    links: LinksFunction = medium.links, driver: str = LAB) -> Plan:
    return plan_experiment(load_yaml(path), overrides=overrides, scale=scale, links=links, driver=driver)


def plan_experiment(document: Document, *, overrides: list[str] = (), scale: str | None = None,
                    links: LinksFunction = medium.links, available_cc: list[str] | None = None,
                    driver: str = LAB) -> Plan:
    """Every run of the file for `driver`, validated; all problems at once."""
    if driver not in DRIVERS:
        raise ValueError(f"unknown driver {driver!r}")
    if not isinstance(document.data, dict):
        raise document.error((), "expected a mapping (an experiment file)")
    _apply_scale(document, scale)
    _apply_overrides(document, overrides)
    inline_topology_file(document)
    # ns-2's TCP agents are its own (and the sim has no TCP): the kernel's list matters to labs only.
    cc = [] if driver != LAB else available_cc if available_cc is not None else kernel_congestion_controls()
    problems: list[Problem] = []
    runs: list[Run] = []
    skipped: list[Skipped] = []
    unavailable: list[Problem] = []
    topologies = _Topologies(links)
    for point in expand(document):
        if isinstance(point, list):
            problems.extend(point)
            continue
        try:
            runs.extend(_runs_of(point.document, point.params, point.choices, topologies, cc, skipped, unavailable,
                                 driver))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if not runs and unavailable:
        reasons = [problem for index, problem in enumerate(unavailable) if problem not in unavailable[:index]]
        if not problems:
            raise NothingRunsHere(reasons, skipped)
        problems.extend(reasons)
    if problems:
        raise ConfigError(problems)
    description = document.data.get("description")
    return Plan(document.file, Path(document.file).stem, description if isinstance(description, str) else None,
                sweep_paths(document), runs, skipped)


def _apply_scale(document: Document, scale: str | None) -> None:
    """`--scale NAME`: the file's `scales: {NAME: {PATH: VALUE, ...}}` put
    at their dotted paths, before any --set. A study's default is what
    finishes here in reasonable time; a scale such as `full` is the paper's
    design. The `scales` mapping itself is not part of a run's configuration."""
    scales = document.data.pop("scales", None)
    if scales is not None and not (isinstance(scales, dict)
                                   and all(isinstance(values, dict) for values in scales.values())):
        raise document.error(("scales",), "expected a mapping of scale names to {PATH: VALUE} mappings")
    if scale is None:
        return
    scales = scales or {}
    if scale not in scales:
        known = ", ".join(sorted(scales)) or "none"
        raise ConfigError([Problem("--scale", 0, 0, "", f"{document.file} has no scale {scale!r} (its scales: {known})")])
    for path_text, value in scales[scale].items():
        path = _document_path(document.data, str(path_text))
        document.replace(path, value, document.mark(("scales", scale, path_text))[0])


def _document_path(data: Any, path_text: str) -> tuple[str | int, ...]:
    """A dotted path as the keys it names. A sweep's keys are dotted paths
    themselves (`sweep.topology.generate.n`): at each mapping, the longest run
    of parts that is one of its keys is one key."""
    parts = path_text.split(".")
    path: list[str | int] = []
    node = data
    while parts:
        take = 1
        if isinstance(node, dict):
            take = next((n for n in range(len(parts), 1, -1) if ".".join(parts[:n]) in node), 1)
        key: str | int = ".".join(parts[:take]) if take > 1 else (int(parts[0]) if parts[0].isdigit() else parts[0])
        path.append(key)
        parts = parts[take:]
        if isinstance(node, dict):
            node = node.get(key)
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            node = node[key]
        else:
            node = None
    return tuple(path)


def _apply_overrides(document: Document, overrides: list[str]) -> None:
    """`--set path=value`: the value is YAML, put at the dotted path."""
    for text in overrides:
        path_text, sep, value_text = text.partition("=")
        if not sep or not path_text:
            raise ConfigError([Problem("--set", 0, 0, "", f"expected PATH=VALUE, got {text!r}")])
        path = _document_path(document.data, path_text)
        value = parse_yaml(value_text, f"--set {path_text}").data
        document.replace(path, value, Mark(f"--set {text}", 0, 0, f"--set {path_text}"))


def kernel_congestion_controls() -> list[str]:
    try:
        return AVAILABLE_CC.read_text().split()
    except OSError:
        return []


class _Topologies:
    """Each distinct topology of a plan resolved once, and the hop counts of
    each distinct medium computed once: the sweep points of a study that
    change only its traffic (variants, connections) share the topology,
    those that change only its daemons (queueing, routing) the medium, and
    resolving (placement, the medium's reach) is most of planning's work."""

    def __init__(self, links: LinksFunction):
        self.links = links
        self.resolved: dict[str, tuple[Topology, HopCounts]] = {}
        self.hops: dict[str, HopCounts] = {}

    def resolve(self, document: Document, seed: int, mac: dict[str, Any] | None) -> tuple[Topology, HopCounts]:
        key = resolution_key(document, ("topology",), seed, mac)
        if key not in self.resolved:
            topology = resolve_topology(document, ("topology",), seed=seed, mac=mac)
            medium_key = json.dumps(topology.medium, sort_keys=True)
            if medium_key not in self.hops:
                self.hops[medium_key] = hop_counts(self.links(topology.medium), len(topology.nodes))
            self.resolved[key] = topology, self.hops[medium_key]
        return self.resolved[key]


def _runs_of(document: Document, params: dict[str, Any], choices: dict[str, int], topologies: _Topologies,
             available_cc: list[str], skipped: list[Skipped], unavailable: list[Problem], driver: str) -> list[Run]:
    try:
        spec = ExperimentSpec.model_validate(document.data)
    except ValidationError as exc:
        raise ConfigError(pydantic_problems(document, _without_kind_tags(exc.errors()), (),
                                            StrictModel.known_keys())) from None
    seeds = seeds_of(spec.seeds, spec.seed, document, spec.repetitions)
    mac = resolve_mac(spec.mac) if spec.mac is not None else None
    runs = []
    for seed in seeds:
        topology, hops = topologies.resolve(document, seed, mac)
        if driver == LAB and topology.routing_choice.kind.ns2_only:
            problem = document.problem(("topology", "routing"), only_in_ns2(topology.routing_choice.name))
            unavailable.append(problem)
            skipped.append(Skipped(params, seed, str(problem)))
            continue
        try:
            flows, sysctl, quickack = _Traffic(document, spec, topology, hops, seed, available_cc).resolve()
            if driver == LAB:  # quickack is how Linux turns delayed ACKs off; ns-2 picks a sink agent
                topology, quickack = _quickack_by_routing(document, topology, quickack)
        except _Unavailable as exc:
            unavailable.extend(exc.problems)
            skipped.append(Skipped(params, seed, "; ".join(str(problem) for problem in exc.problems), kernel=True))
            continue
        if driver in UNSUPPORTED:
            problems = UNSUPPORTED[driver](document, spec, topology, flows)
            if problems:  # as an unavailable congestion control: the study's other runs remain
                unavailable.extend(problems)
                skipped.append(Skipped(params, seed, "; ".join(str(problem) for problem in problems)))
                continue
        measure = spec.measure.model_dump()
        if measure["view"] is None:
            del measure["view"]  # so runs without a recording keep their ids
        runs.append(Run(params, choices, seed, topology, flows, spec.duration, spec.warmup, measure, sysctl, quickack,
                        driver))
    return runs


TRAFFIC_KINDS = {"tcp", "udp", "tfrc", "command"}


def _quickack_by_routing(document: Document, topology: Topology,
                         nodes: tuple[str, ...]) -> tuple[Topology, tuple[str, ...]]:
    """Delayed ACKs off needs `quickack 1` on the routes the receivers use.
    Static (and subnet-only) routes exist when the lab is up: the runner
    marks them in `nodes`. A daemon's routes come and go while it runs, so
    marking them from outside would race it: aodvd marks every route it
    installs itself (a daemon's settings are per lab, so in every node).
    babeld cannot."""
    choice = topology.routing_choice
    if not nodes or choice.kind.daemon is None:
        return topology, nodes
    if choice.kind.marks_quickack:
        marked = dataclasses.replace(choice, options={**choice.options, "quickack": True})
        return dataclasses.replace(topology, routing_choice=marked), ()
    marking = " or ".join(name for name, kind in ROUTING_KINDS.items() if kind.marks_quickack)
    raise document.error(("topology", "routing"), f"delayed_ack: off needs quickack on the routes the receiver "
                         f"uses, and {choice.name} installs its routes without it: use delayed_ack: on, or "
                         f"routing {marking} or static")


def _without_kind_tags(errors: list[Any]) -> list[Any]:
    """pydantic ends the location of a whole-entry error in a traffic entry
    with the union tag (`traffic.1.udp`); the entry itself is meant."""
    cleaned = []
    for error in errors:
        loc = tuple(error["loc"])
        if (len(loc) == 3 and loc[0] == "traffic" and loc[2] in TRAFFIC_KINDS
                and error["type"] not in ("missing", "extra_forbidden")):
            error = {**error, "loc": loc[:2]}
        cleaned.append(error)
    return cleaned


def hop_counts(link_report: dict[str, Any], count: int) -> list[list[int | None]]:
    """Minimum hops between every pair over links in receive range both ways
    (802.11 unicast needs the ACK back); None where there is no path."""
    heard = medium.rx_neighbours(link_report, count)
    both_ways = [{b for b in heard[a] if a in heard[b]} for a in range(count)]
    table: list[list[int | None]] = []
    for source in range(count):
        distance: list[int | None] = [None] * count
        distance[source] = 0
        pending = deque([source])
        while pending:
            node = pending.popleft()
            for other in sorted(both_ways[node]):
                if distance[other] is None:
                    distance[other] = distance[node] + 1  # type: ignore[operator]
                    pending.append(other)
        table.append(distance)
    return table


class _Traffic:
    """Resolves the traffic entries of one run against its topology."""

    def __init__(self, document: Document, spec: ExperimentSpec, topology: Topology,
                 hops: list[list[int | None]], seed: int, available_cc: list[str]):
        self.doc = document
        self.spec = spec
        self.names = [node.name for node in topology.nodes]
        self.hops = hops
        self.seed = seed
        self.available_cc = available_cc
        self.static = topology.lab_routing == "static"
        self.entry_of: dict[str, int] = {}  # flow name -> index of its traffic entry
        self.problems: list[Problem] = []
        self.unavailable: list[Problem] = []  # what this kernel lacks (the run is skipped)

    def problem(self, path: DataPath, message: str) -> None:
        self.problems.append(self.doc.problem(path, message))

    def resolve(self) -> tuple[tuple[Flow, ...], dict[str, dict[str, str]], tuple[str, ...]]:
        flows: list[Flow] = []
        used_names: dict[str, int] = {}
        for index, entry in enumerate(self.spec.traffic):
            path: DataPath = ("traffic", index)
            name = entry.name or f"f{index}"
            if name in used_names:
                self.problem(path + ("name",), f"flow name {name!r} is used by traffic[{used_names[name]}] too")
            used_names[name] = index
            self.entry_of[name] = index
            stop = entry.stop if entry.stop is not None else self.spec.duration
            if entry.start >= self.spec.duration:
                self.problem(path + ("start",), "starts after the run ends (duration)")
            if stop > self.spec.duration:
                self.problem(path + ("stop",), "stops after the run ends (duration)")
            if isinstance(entry, CommandTraffic):
                if entry.node not in self.names:
                    self.problem(path + ("node",), f"unknown node {entry.node!r}")
                flows.append(Flow(name, "command", entry.node, None, None, entry.start, stop, None,
                                  {"argv": list(entry.argv), "stop_given": entry.stop is not None}))
                continue
            options = self._options(entry, path, stop - entry.start)
            port = entry.port if entry.port is not None else FIRST_PORT + index
            if entry.src == "all":
                dst = self._node(entry.dst, path + ("dst",))
                if dst is None:
                    continue
                senders = [node for node in range(len(self.names)) if node != dst]
                # The k-th sender's port skips the other entries' ports.
                for k, src in enumerate(senders):
                    member = f"{name}-{self.names[src]}"
                    if member in used_names:
                        self.problem(path + ("name",), f"flow name {member!r} (src: all) is used by "
                                                       f"traffic[{used_names[member]}] too")
                    used_names[member] = index
                    self.entry_of[member] = index
                    flows.append(self._flow(entry, path, member, src, dst, stop, port + k * len(self.spec.traffic),
                                            options, group=name))
                continue
            endpoints = self._endpoints(entry, path, index)
            if endpoints is None:
                continue
            src, dst = endpoints
            flows.append(self._flow(entry, path, name, src, dst, stop, port, options))
        self._check_ports(flows)
        sysctl, quickack = self._node_settings(flows)
        if self.problems:
            raise ConfigError(self.problems + self.unavailable)
        if self.unavailable:
            raise _Unavailable(self.unavailable)
        return tuple(flows), sysctl, quickack

    def _flow(self, entry: TcpTraffic | UdpTraffic | TfrcTraffic, path: DataPath, name: str, src: int, dst: int,
              stop: int, port: int, options: dict[str, Any], group: str | None = None) -> Flow:
        hop_count = self.hops[src][dst]
        if hop_count is None and self.static:
            self.problem(path, f"{self.names[dst]} cannot be reached from {self.names[src]} at time 0 "
                               "(static routes over links that work both ways)")
        return Flow(name, entry.kind, self.names[src], self.names[dst], hop_count, entry.start, stop, port, options,
                    group)

    def _node(self, value: str, path: DataPath) -> int | None:
        if value == "first":
            return 0
        if value == "last":
            return len(self.names) - 1
        if value in self.names:
            return self.names.index(value)
        self.problem(path, f"unknown node {value!r} (a node name, first, last or random; src may be all)")
        return None

    def _endpoints(self, entry: TcpTraffic | UdpTraffic | TfrcTraffic, path: DataPath,
                   index: int) -> tuple[int, int] | None:
        rng = random.Random(f"meshemu-traffic:{self.seed}:{index}")
        count = len(self.names)
        reachable = [(a, b) for a in range(count) for b in range(count) if a != b and self.hops[a][b] is not None]
        if entry.pair == "farthest":
            if not reachable:
                self.problem(path + ("pair",), "no two nodes reach each other")
                return None
            longest = max(self.hops[a][b] for a, b in reachable)  # type: ignore[type-var]
            return rng.choice([(a, b) for a, b in reachable if self.hops[a][b] == longest])
        if entry.pair == "random" or (entry.src == "random" and entry.dst == "random"):
            if not reachable:
                self.problem(path, "no two nodes reach each other")
                return None
            return rng.choice(reachable)
        assert entry.src is not None and entry.dst is not None
        src = None if entry.src == "random" else self._node(entry.src, path + ("src",))
        dst = None if entry.dst == "random" else self._node(entry.dst, path + ("dst",))
        if entry.src == "random" and dst is not None:
            candidates = [a for a, b in reachable if b == dst]
            if not candidates:
                self.problem(path + ("src",), f"no node reaches {entry.dst}")
                return None
            src = rng.choice(candidates)
        elif entry.dst == "random" and src is not None:
            candidates = [b for a, b in reachable if a == src]
            if not candidates:
                self.problem(path + ("dst",), f"{entry.src} reaches no node")
                return None
            dst = rng.choice(candidates)
        if src is None or dst is None:
            return None
        if src == dst:
            self.problem(path, f"src and dst are the same node ({self.names[src]})")
            return None
        return src, dst

    def _options(self, entry: TcpTraffic | UdpTraffic | TfrcTraffic, path: DataPath, length_ns: int) -> dict[str, Any]:
        uses_iperf3 = isinstance(entry, TcpTraffic) or (isinstance(entry, UdpTraffic) and entry.tool == "iperf3")
        if uses_iperf3 and length_ns % NS:
            self.problem(path, f"an iperf3 flow lasts whole seconds (iperf3 -t), not {length_ns / NS:g} s "
                               "from start to stop")
        if isinstance(entry, TcpTraffic):
            if entry.cc is not None and self.available_cc and entry.cc not in self.available_cc:
                message = (f"congestion control {entry.cc!r} is not available in this kernel; "
                           f"net.ipv4.tcp_available_congestion_control: {' '.join(self.available_cc)}")
                if entry.cc in LINUX_CONGESTION_CONTROLS:
                    self.unavailable.append(self.doc.problem(path + ("cc",), message))
                else:
                    self.problem(path + ("cc",), message + " (and Linux has no congestion control of that name)")
            if entry.min_rto is not None and entry.min_rto < 1000:
                self.problem(path + ("min_rto",), "at least 1 us (net.ipv4.tcp_rto_min_us counts microseconds)")
            # Options added later only when given, so the runs of files without them keep their ids.
            given = {key: value for key, value in (("min_rto", entry.min_rto), ("timestamps", entry.timestamps),
                                                   ("ns2_agent", entry.ns2_agent))
                     if value is not None}
            return {"cc": entry.cc, "mss": entry.mss, "window": entry.window, "sack": entry.sack,
                    "delayed_ack": entry.delayed_ack, **given}
        if isinstance(entry, UdpTraffic):
            return {"rate_bps": entry.rate, "packet": entry.packet, "tool": entry.tool}
        contenders = entry.contenders or Contenders()
        return {"mode": entry.mode, "packet": entry.packet, "rate_cap_bps": entry.rate_cap, "re_hops": entry.hops,
                "phy": entry.phy, "contenders_end": contenders.end, "contenders_middle": contenders.middle,
                "max_cut": entry.max_cut, "tolerance": entry.tolerance}

    def _check_ports(self, flows: list[Flow]) -> None:
        seen: dict[tuple[str, str, int], str] = {}
        for flow in flows:
            if flow.port is None or flow.dst is None:
                continue
            protocol = "tcp" if flow.kind == "tcp" or flow.options.get("tool") == "iperf3" else "udp"
            key = (flow.dst, protocol, flow.port)
            if key in seen:
                self.problem(("traffic", self.entry_of[flow.name], "port"), f"port {flow.port} on {flow.dst} is used by flow "
                                                         f"{seen[key]} too")
            seen[key] = flow.name

    def _node_settings(self, flows: list[Flow]) -> tuple[dict[str, dict[str, str]], tuple[str, ...]]:
        """sysctl per node (the file's for every node, then SACK and
        timestamps at both ends of TCP flows and the minimum RTO at their
        senders) and the receivers whose routes get quickack."""
        settings: dict[str, dict[str, str]] = {name: dict(self.spec.sysctl or {}) for name in self.names}
        set_by: dict[tuple[str, str], tuple[str, str]] = {}  # (node, key) -> (value, flow)
        quickack: list[str] = []

        def node_setting(flow: Flow, option: str, node: str, key: str, value: str) -> None:
            earlier = set_by.get((node, key))
            if earlier is not None and earlier[0] != value:
                self.problem(("traffic", self.entry_of[flow.name], option),
                             f"{option} is a setting of the node ({key}): flow {earlier[1]} sets it otherwise on {node}")
            set_by[(node, key)] = (value, flow.name)
            settings[node][key] = value

        for flow in flows:
            if flow.kind != "tcp":
                continue
            assert flow.src is not None and flow.dst is not None
            for option, key in (("sack", "net.ipv4.tcp_sack"), ("timestamps", "net.ipv4.tcp_timestamps")):
                if flow.options.get(option) is not None:
                    for node in (flow.src, flow.dst):
                        node_setting(flow, option, node, key, "1" if flow.options[option] else "0")
            if "min_rto" in flow.options:
                node_setting(flow, "min_rto", flow.src, "net.ipv4.tcp_rto_min_us", str(flow.options["min_rto"] // 1000))
            if flow.options["delayed_ack"] is False and flow.dst not in quickack:
                quickack.append(flow.dst)
        return {node: values for node, values in settings.items() if values}, tuple(quickack)
