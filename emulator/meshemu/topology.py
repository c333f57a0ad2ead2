"""Topology files -> the resolved medium configuration (emulator/README.md §1).

`load_topology(path)` reads, validates and resolves a topology file; nothing
outside this process is touched except `meshemu-medium`: `links` validates
the resolved configuration with the model's own checks, `connected` tells
random generators which of their placements is connected. Every problem is
reported as `FILE:LINE:COL: path: problem`, all at once where possible.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from . import generators, limits, medium, profiles
from .choices import QueueingChoice, RoutingChoice, queueing_choice_of, routing_choice_of
from .errors import ConfigError, Problem
from .ns2trace import TraceNode, load_trace
from .schema import (
    ChainGenerator, GridGenerator, HwsimBackend, NodeSpec, Ns2TraceMobility, RandomGenerator, RandomWaypointMobility,
    Radio, SetdestMobility, StarGenerator, StaticMobility, StrictModel, StripGenerator, TdmaMac, TopologySpec,
    WaypointsMobility, resolved, resolved_key,
)
from .source import DataPath, Document, load_yaml, pydantic_problems

Position = tuple[float, float, float]

# Control traffic the medium queues first (AODV, OLSR, babel, bpd beacons).
PRIORITY_UDP_PORTS = [654, 698, 6696, 6710]
LAB_MTU = 1500


@dataclass(frozen=True)
class TopologyNode:
    index: int
    name: str
    ipv4: ipaddress.IPv4Address
    position: Position  # at time 0 (ignored by the model under random_waypoint)


@dataclass(frozen=True)
class Topology:
    """A resolved topology: node names and addresses, and the medium
    configuration of section 1 (JSON-ready)."""

    name: str | None
    source: str
    subnet: ipaddress.IPv4Network
    nodes: tuple[TopologyNode, ...]
    medium: dict[str, Any]
    routing_choice: RoutingChoice = RoutingChoice("static")
    # {"kind": "tap"} or {"kind": "hwsim", "mode", "ssid", "frequency_mhz", "vm"} (see hwsim.py)
    backend: dict[str, Any] = field(default_factory=lambda: {"kind": "tap"})
    queueing: QueueingChoice = QueueingChoice()  # bpd in every node unless fifo (choices.py, queueing.py)
    # LAB.json's realtime: {"sched_fifo": off | auto | on, "spin_ns"} (emulator/README.md section 4)
    realtime: dict[str, Any] = field(default_factory=lambda: {"sched_fifo": "auto", "spin_ns": 0})
    arp: str = "kernel"  # LAB.json's arp: kernel | resolve_once (emulator/README.md section 4)

    @property
    def lab_routing(self) -> str:
        """LAB.json's `routing`: static, or none when a daemon (routing_choice) owns the routes."""
        return self.routing_choice.kind.lab_routing

    def node(self, name: str) -> TopologyNode:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def netns(self, lab: str, node: TopologyNode) -> str:
        return f"{lab}-{node.name}"

    def lab_config(self, lab: str, run_dir: Path, hold_mobility: bool = False) -> dict[str, Any]:
        """LAB.json for `meshemu-medium tap` (section 4)."""
        return {
            "lab": lab,
            "run_dir": str(run_dir),
            "medium": self.medium,
            "nodes": [{"netns": self.netns(lab, node), "ipv4": str(node.ipv4),
                       "prefix_len": self.subnet.prefixlen, "mtu": LAB_MTU} for node in self.nodes],
            "routing": self.lab_routing,
            "priority_udp_ports": PRIORITY_UDP_PORTS,
            "realtime": self.realtime,
            "ipv6_link_local": self.routing_choice.kind.ipv6_link_local,
            "hold_mobility": hold_mobility,
            "arp": self.arp,
        }


def load_topology(path: str | Path) -> Topology:
    return resolve_topology(load_yaml(path))


def validate_spec(document: Document, prefix: DataPath = ()) -> TopologySpec:
    data = document.get(prefix)
    if not isinstance(data, dict):
        raise document.error(prefix, "expected a mapping (a topology)")
    try:
        return TopologySpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(pydantic_problems(document, exc.errors(), prefix, StrictModel.known_keys())) from None


def resolve_topology(document: Document, prefix: DataPath = (), *, seed: int | None = None,
                     mac: dict[str, Any] | None = None) -> Topology:
    """Resolve the topology at `prefix` of `document`. A sim file overrides
    the seed and the MAC of the topology it names."""
    spec = validate_spec(document, prefix)
    return _Resolver(document, prefix, spec, seed, mac).resolve()


def resolution_key(document: Document, prefix: DataPath, seed: int | None, mac: dict[str, Any] | None) -> str:
    """Everything `resolve_topology` depends on, as text: the section as
    written (order and types kept), the seed and MAC given, the file (the
    topology's source) and the file an ns-2 trace is named in (its path is
    relative to that file). Equal keys resolve to equal topologies."""
    trace_named_in = document.mark(prefix + ("mobility", "file"))[0].file
    return repr((document.get(prefix), seed, mac, document.file, trace_named_in))


# --- resolution -------------------------------------------------------------------------

@dataclass
class _Layer:
    """One mapping of radio settings and where it is written."""

    document: Document
    path: DataPath
    radio: Radio


@dataclass
class _NodeRadio:
    """A node's resolved radio (section 1's keys) and, for each key a layer
    set (user keys), its rank (more specific layers later) and that layer."""

    radio: dict[str, Any]
    origin: dict[str, tuple[int, _Layer]]


# A field of a node's radio in the model's error paths: nodes[3].radio.cw_min
_RADIO_FIELD = re.compile(r"^nodes\[(?P<node>\d+)\]\.radio\.(?P<key>[a-z0-9_]+)")


@dataclass
class _PlannedNode:
    name: str
    position: Position | None
    position_path: DataPath  # where the position comes from (for "outside the area")
    spec: NodeSpec = field(default_factory=NodeSpec)
    spec_path: DataPath | None = None  # the node's own entry under nodes:, if any
    generated: bool = False


class _Resolver:
    def __init__(self, document: Document, prefix: DataPath, spec: TopologySpec, seed: int | None,
                 mac: dict[str, Any] | None):
        self.doc = document
        self.prefix = prefix
        self.spec = spec
        self.seed = spec.seed if seed is None else seed
        self.mac_override = mac
        self.queueing = queueing_choice_of(spec.queueing)
        self.problems: list[Problem] = []

    def at(self, *path: str | int) -> DataPath:
        return self.prefix + path

    def problem(self, path: DataPath, message: str, document: Document | None = None) -> None:
        self.problems.append((document or self.doc).problem(path, message))

    def check(self) -> None:
        if self.problems:
            raise ConfigError(self.problems)

    def resolve(self) -> Topology:
        profile_layer = self._profile_layer()
        planned = self._plan_nodes()
        self.check()
        layers = [profile_layer]
        if self.spec.radio is not None:
            layers.append(_Layer(self.doc, self.at("radio"), self.spec.radio))
        if self.spec.defaults is not None and self.spec.defaults.radio is not None:
            layers.append(_Layer(self.doc, self.at("defaults", "radio"), self.spec.defaults.radio))
        radios = []
        for node in planned:
            node_layers = list(layers)
            if node.spec.radio is not None and node.spec_path is not None:
                node_layers.append(_Layer(self.doc, node.spec_path + ("radio",), node.spec.radio))
            radios.append(self._radio(node_layers))
        mobilities = self._mobilities(planned)
        addresses = self._addresses(planned)
        link_entries = self._links(planned)
        self.check()

        config = {
            "seed": self.seed,
            "mac": self.mac_override if self.mac_override is not None else self._mac(),
            "nodes": [
                {
                    "name": node.name,
                    "mac_address": mac_address(index),
                    "position": list(node.position or (0.0, 0.0, 0.0)),
                    "promiscuous": self._promiscuous(node),
                    "mobility": mobilities[index],
                    "radio": radios[index].radio,
                }
                for index, node in enumerate(planned)
            ],
            "links": link_entries,
        }
        self._place_and_check(planned, config, radios)
        self._check_area(planned, mobilities)
        self.check()
        nodes = tuple(
            TopologyNode(index, node.name, addresses[index], tuple(config["nodes"][index]["position"]))
            for index, node in enumerate(planned)
        )
        choice = routing_choice_of(self.spec.routing)
        fifo = self.spec.realtime.sched_fifo
        realtime = {"sched_fifo": {True: "on", False: "off"}.get(fifo, fifo), "spin_ns": self.spec.realtime.spin}
        return Topology(self.spec.name, self.doc.file, self.spec.subnet, nodes, config, choice,
                        self._backend(), self.queueing, realtime, self.spec.arp)

    def _backend(self) -> dict[str, Any]:
        backend = self.spec.backend
        if not isinstance(backend, HwsimBackend):
            return {"kind": "tap"}
        if backend.frequency % 1e6 != 0:
            self.problem(self.at("backend", "frequency"), f"the channel frequency must be whole MHz, got "
                         f"{backend.frequency / 1e6} MHz")
            self.check()
        return {"kind": "hwsim", "mode": backend.mode, "ssid": backend.ssid,
                "frequency_mhz": round(backend.frequency / 1e6), "vm": backend.vm}

    # --- profile and radio ---

    def _profile_layer(self) -> _Layer:
        document, radio = profiles.load(self.spec.profile)
        return _Layer(document, (), radio)

    def _medium_flushes_for_aodvd(self) -> bool:
        """Whether aodvd runs with link-layer feedback but leaves the
        flush of the queue behind a failed frame to the medium: its preset
        ns2 has feedback and asks for the flushes itself (`flush_on_break`,
        where ns-2 flushes: only where a break takes routes down, not where
        it repairs them), unless the keys beside it say otherwise."""
        options = getattr(self.spec.routing, "aodv", None)
        if options is None:
            return False
        ns2 = options.preset == "ns2"
        feedback = options.link_layer_feedback if options.link_layer_feedback is not None else ns2
        asks = options.flush_on_break if options.flush_on_break is not None else ns2
        return feedback and not asks

    def _radio(self, layers: list[_Layer]) -> _NodeRadio:
        """Merge the layers (later wins) into the resolved radio of section
        1, and remember where each key was set."""
        value: dict[str, Any] = {}
        origin: dict[str, tuple[int, _Layer]] = {}
        for rank, layer in enumerate(layers):
            for key in layer.radio.model_fields_set:
                value[key] = getattr(layer.radio, key)
                origin[key] = (rank, layer)
        if self._medium_flushes_for_aodvd() and origin.get("retry_drop_flush", (0, None))[0] == 0:
            # ns-2's AODV with link-layer feedback drops the interface queue's
            # packets to a next hop whose link failed (rt_ll_failed): unless a
            # layer above the profile says otherwise, the medium does the same.
            value["retry_drop_flush"] = True
        if "interference_floor" not in value:
            value["interference_floor"] = min(value["cs_threshold"],
                                              value["rx_threshold"] - value["capture_threshold"]) - 10.0
        radio = {resolved_key(Radio, key): resolved(value[key]) for key in Radio.model_fields}
        return _NodeRadio(radio, origin)

    def _place_and_check(self, planned: list[_PlannedNode], config: dict[str, Any], radios: list[_NodeRadio]) -> None:
        """Place random generators' nodes, and let the model validate the
        configuration: it owns what the values mean together (the PHY's
        rates, the order of thresholds and contention windows, the TDMA
        slot). What it refuses is located in the files."""
        try:
            if not self._place_connected(planned, config):
                medium.validate(config)  # else done: the medium validates before it judges placements
        except medium.ConfigRejected as rejected:
            self.problems.append(self._locate(rejected, radios))
            self.check()

    def _locate(self, rejected: medium.ConfigRejected, radios: list[_NodeRadio]) -> Problem:
        """Where the files wrote what the model refuses: a radio key at the
        most specific layer that set one of the keys involved (the one named,
        or another its reason names), in the user's words."""
        user_keys = {resolved_key(Radio, key): key for key in Radio.model_fields}
        reason = rejected.reason
        for section_key, key in user_keys.items():  # in the user's words
            reason = re.sub(rf"\b{section_key}\b", key, reason)
        radio_field = _RADIO_FIELD.match(rejected.path)
        if radio_field is not None and radio_field["key"] in user_keys:
            origin = radios[int(radio_field["node"])].origin
            named = user_keys[radio_field["key"]]
            others = [key for key in user_keys.values() if key != named and re.search(rf"\b{key}\b", reason)]
            involved = [named, *others]
            key = max((key for key in involved if key in origin), key=lambda k: origin[k][0], default=None)
            if key is not None:
                layer = origin[key][1]
                return layer.document.problem(layer.path + (key,), reason)
        if rejected.path.startswith("mac."):
            return self.doc.problem(self.at("mac"), reason)
        return self.doc.problem(self.prefix, f"the medium refuses {rejected.path}: {reason}")

    # --- nodes and positions ---

    def _plan_nodes(self) -> list[_PlannedNode]:
        planned = [_PlannedNode(f"n{i}", position, self.at("generate"), generated=True)
                   for i, position in enumerate(self._generated_positions())]
        by_name = {node.name: node for node in planned}
        for name, node_spec in (self.spec.nodes or {}).items():
            path = self.at("nodes", name)
            node_spec = node_spec or NodeSpec()
            node = by_name.get(name)
            if node is None:  # a node of its own, after the generated ones
                node = _PlannedNode(name, None, path)
                planned.append(node)
                by_name[name] = node
            node.spec, node.spec_path = node_spec, path
            if node_spec.position is not None:
                node.position, node.position_path = node_spec.position, path + ("position",)
        if not planned:
            self.problem(self.prefix, "no nodes: add a generate: section or nodes:")
        if len(planned) > limits.MAX_NODES:
            self.problem(self.at("nodes"), f"{len(planned)} nodes, more than the {limits.MAX_NODES} of a topology "
                                           "(meshemu/limits.py)")
        return planned

    def _generated_positions(self) -> list[Position | None]:
        """Positions of generated nodes; None for random generators (placed
        once the radios are known, see `_place_connected`)."""
        generate = self.spec.generate
        if generate is None:
            return []
        if isinstance(generate, ChainGenerator):
            return list(generators.chain(generate.n, generate.spacing))
        if isinstance(generate, GridGenerator):
            return list(generators.grid(generate.rows, generate.cols, generate.spacing))
        if isinstance(generate, StarGenerator):
            return list(generators.star(generate.n, generate.radius))
        if isinstance(generate, RandomGenerator) and self.spec.area is None:
            self.problem(self.at("generate"), "the random generator places nodes in the area: add area: {min: [x, y], "
                                              "max: [x, y]}")
        return [None] * generate.n

    def _random_box(self) -> tuple[tuple[float, float], tuple[float, float]]:
        generate = self.spec.generate
        if isinstance(generate, StripGenerator):
            return (0.0, 0.0), (generate.length, generate.width)
        assert self.spec.area is not None
        return self.spec.area.min, self.spec.area.max

    def _place_connected(self, planned: list[_PlannedNode], config: dict[str, Any]) -> bool:
        """Draw the random generator's positions (seeded), redrawing until the
        medium says the network is connected, if asked; whether the medium
        was asked."""
        generate = self.spec.generate
        if not isinstance(generate, (RandomGenerator, StripGenerator)):
            return False
        low, high = self._random_box()
        # Nodes placed otherwise (a position of their own, a mobility that sets it) keep it.
        targets = tuple(i for i in range(generate.n) if planned[i].position is None)
        if generate.connected:
            placement = connected_placement(json.dumps(config, sort_keys=True), targets, generate.n, low, high,
                                            self.seed)
            if placement.attempt is None or placement.attempt >= generate.max_attempts:
                self.problem(self.at("generate"), self._placement_failure(placement, len(planned), bool(targets)))
                return True
            positions = placement.positions
        else:
            positions = tuple(generators.uniform(random.Random(self.seed), generate.n, low, high))
        for i in targets:
            planned[i].position = positions[i]
            config["nodes"][i]["position"] = list(positions[i])
        return generate.connected

    def _placement_failure(self, placement: Placement, node_count: int, redrawn: bool) -> str:
        """Why no placement connected, and what to change."""
        generate = self.spec.generate
        assert isinstance(generate, (RandomGenerator, StripGenerator))
        tried = (f"no connected placement of {generate.n} nodes found in {generate.max_attempts} attempts with seed "
                 f"{self.seed}")
        best = f"the largest group of nodes that reach each other has {placement.largest} of the {node_count} nodes"
        if not redrawn:
            return (f"{tried}: the nodes' positions at time 0 do not come from the generator (their mobility or "
                    f"their own positions set them; random_waypoint draws them from the seed), so redrawing cannot "
                    f"connect them, and with this seed {best}: choose another seed, or connected: false")
        if placement.attempt is not None:
            return (f"{tried}: attempt {placement.attempt + 1} is the first connected one: set max_attempts: "
                    f"{placement.attempt + 1}, or choose another seed")
        further = f"nor in the first {placement.searched}, the most a file may ask for; " \
            if placement.searched > generate.max_attempts else ""
        return (f"{tried} ({further}at best {best}): add nodes, shrink the area or enlarge the radio range, or use "
                "connected: false")

    def _promiscuous(self, node: _PlannedNode) -> bool:
        if node.spec.promiscuous is not None:
            given, path = node.spec.promiscuous, (node.spec_path or self.at("nodes")) + ("promiscuous",)
        elif self.spec.defaults is not None and self.spec.defaults.promiscuous is not None:
            given, path = self.spec.defaults.promiscuous, self.at("defaults", "promiscuous")
        else:
            # Backpressure by overhearing listens to every neighbour's transmissions.
            return self.queueing.overhears
        if self.queueing.overhears and not given:
            problem = self.doc.problem(path, "queueing knowledge overhear needs promiscuous nodes (bpd overhears its "
                                             "neighbours): remove this or choose knowledge: beacon or oracle")
            if problem not in self.problems:  # defaults: once, not once per node
                self.problems.append(problem)
        return given

    # --- mobility ---

    def _mobilities(self, planned: list[_PlannedNode]) -> list[dict[str, Any]]:
        lab_mobility = self.spec.mobility
        defaults_mobility = self.spec.defaults.mobility if self.spec.defaults else None
        if lab_mobility is not None and defaults_mobility is not None:
            self.problem(self.at("defaults", "mobility"), "give mobility either at the top level or in defaults, "
                                                          "not both")
        trace: dict[int, TraceNode] = {}
        if isinstance(lab_mobility, Ns2TraceMobility):
            trace = self._trace(lab_mobility, len(planned))
        result = []
        for index, node in enumerate(planned):
            if node.spec.mobility is not None:
                assert node.spec_path is not None
                spec, path = node.spec.mobility, node.spec_path + ("mobility",)
            elif index in trace:
                result.append(self._trace_mobility(node, trace[index]))
                continue
            elif isinstance(lab_mobility, (StaticMobility, RandomWaypointMobility)):
                spec, path = lab_mobility, self.at("mobility")
            elif defaults_mobility is not None:
                spec, path = defaults_mobility, self.at("defaults", "mobility")
            else:
                spec, path = StaticMobility(model="static"), self.at("nodes", node.name)
            result.append(self._node_mobility(node, spec, path))
        for node in planned:
            if node.position is None and not node.generated:
                self.problem(node.position_path, "position is required (or a mobility that sets it)")
        return result

    def _node_mobility(self, node: _PlannedNode, spec: Any, path: DataPath) -> dict[str, Any]:
        if isinstance(spec, WaypointsMobility):
            node.position, node.position_path = spec.points[0][1], path + ("points", 0)
            return {"kind": "waypoints",
                    "points": [{"t_ns": time, "position": list(position)} for time, position in spec.points]}
        if isinstance(spec, SetdestMobility):
            return {"kind": "setdest", "moves": [{"t_ns": move.at, "target": list(move.to),
                                                  "speed_mps": move.speed} for move in spec.moves]}
        if isinstance(spec, RandomWaypointMobility):
            if self.spec.area is None:
                self.problem(path, "random_waypoint moves nodes inside the area: add area: {min: [x, y], max: [x, y]}")
                return {"kind": "static"}
            area = self.spec.area
            if node.position is None:  # ignored by the model, which draws it
                node.position = (area.min[0], area.min[1], 0.0)
            return {"kind": "random_waypoint",
                    "area": {"min": list(area.min), "max": list(area.max)},
                    "speed_mps": {"min": spec.speed[0], "max": spec.speed[1]},
                    "pause_ns": {"min": round(spec.pause[0]), "max": round(spec.pause[1])},
                    "steady_state": spec.steady_state}
        return {"kind": "static"}

    def _trace(self, spec: Ns2TraceMobility, count: int) -> dict[int, TraceNode]:
        path = self.at("mobility", "file")
        mark, _ = self.doc.mark(path)
        trace_path = Path(mark.file).parent / spec.file
        try:
            trace = load_trace(trace_path, str(trace_path))
        except ConfigError as exc:
            self.problems.extend(self.doc.where_named(path, exc).problems)
            return {}
        for index, entry in sorted(trace.items()):
            if index >= count:
                self.problems.append(Problem(str(trace_path), entry.first_line, 1, "",
                                             f"node {index} does not exist (the topology has {count} nodes, 0 to "
                                             f"{count - 1})"))
        return {index: entry for index, entry in trace.items() if index < count}

    def _trace_mobility(self, node: _PlannedNode, entry: TraceNode) -> dict[str, Any]:
        if entry.initial:
            old = node.position or (0.0, 0.0, 0.0)
            node.position = (entry.initial.get("X", old[0]), entry.initial.get("Y", old[1]),
                             entry.initial.get("Z", old[2]))
            node.position_path = self.at("mobility", "file")
        z = node.position[2] if node.position else 0.0
        return {"kind": "setdest", "moves": [{"t_ns": move.at_ns, "target": [move.target[0], move.target[1], z],
                                              "speed_mps": move.speed_mps} for move in entry.moves]}

    def _check_area(self, planned: list[_PlannedNode], mobilities: list[dict[str, Any]]) -> None:
        area = self.spec.area
        if area is None:
            return

        def inside(position: list[float] | tuple[float, ...]) -> bool:
            return area.min[0] <= position[0] <= area.max[0] and area.min[1] <= position[1] <= area.max[1]

        bounds = f"[{area.min[0]:g}, {area.min[1]:g}] to [{area.max[0]:g}, {area.max[1]:g}]"
        for node, mobility in zip(planned, mobilities):
            if mobility["kind"] == "random_waypoint":
                continue
            if node.position is not None and not inside(node.position):
                self.problem(node.position_path, f"node {node.name} at ({node.position[0]:g}, {node.position[1]:g}) "
                                                 f"is outside the area {bounds}")
            targets = [move["target"] for move in mobility.get("moves", [])]
            targets += [point["position"] for point in mobility.get("points", [])]
            for target in targets:
                if not inside(target):
                    self.problem(node.spec_path or self.at("mobility"),
                                 f"node {node.name} moves to ({target[0]:g}, {target[1]:g}), outside the area {bounds}")
                    break

    # --- addresses, links, mac ---

    def _addresses(self, planned: list[_PlannedNode]) -> list[ipaddress.IPv4Address]:
        subnet = self.spec.subnet
        if subnet.prefixlen > 30:
            self.problem(self.at("subnet"), f"{subnet} is too small: use a prefix of /30 or shorter")
            return []
        host_count = subnet.num_addresses - 2
        addresses: list[ipaddress.IPv4Address] = []
        owner: dict[ipaddress.IPv4Address, str] = {}
        for index, node in enumerate(planned):
            explicit = node.spec.ipv4
            path = (node.spec_path or self.at("nodes")) + ("ipv4",)
            if explicit is not None:
                if explicit not in subnet:
                    self.problem(path, f"{explicit} is outside the subnet {subnet}")
                elif explicit in (subnet.network_address, subnet.broadcast_address):
                    self.problem(path, f"{explicit} is the {'network' if explicit == subnet.network_address else 'broadcast'} "
                                       f"address of {subnet}")
                address = explicit
            elif index < host_count:
                address = subnet.network_address + index + 1
            else:
                self.problem(self.at("subnet"), f"{subnet} has {host_count} host addresses, too few for "
                                                f"{len(planned)} nodes")
                return []
            if address in owner:
                self.problem(path if explicit is not None else self._address_path(planned, owner[address]),
                             f"duplicate address {address} ({owner[address]} and {node.name})")
            owner[address] = node.name
            addresses.append(address)
        return addresses

    def _address_path(self, planned: list[_PlannedNode], name: str) -> DataPath:
        node = next(node for node in planned if node.name == name)
        return (node.spec_path or self.at("nodes")) + ("ipv4",)

    def _links(self, planned: list[_PlannedNode]) -> list[dict[str, Any]]:
        index = {node.name: i for i, node in enumerate(planned)}
        entries = []
        seen: set[tuple[int, int]] = set()
        for number, link in enumerate(self.spec.links or []):
            path = self.at("links", number)
            ends = []
            for end in ("a", "b"):
                name = getattr(link, end)
                if name not in index:
                    self.problem(path + (end,), f"unknown node {name!r}")
                ends.append(index.get(name))
            if None in ends:
                continue
            a, b = ends
            if a == b:
                self.problem(path, f"a link needs two different nodes, got {link.a} twice")
                continue
            if (min(a, b), max(a, b)) in seen:
                self.problem(path, f"a second entry for the link {link.a}-{link.b}")
            seen.add((min(a, b), max(a, b)))
            if link.bit_error_rate is None and link.extra_loss is None:
                self.problem(path, "give bit_error_rate, extra_loss or both")
                continue
            entry: dict[str, Any] = {"a": a, "b": b, "extra_loss_db": link.extra_loss or 0.0}
            if link.bit_error_rate is not None:  # absent: the pair keeps the radios' rate
                entry["bit_error_rate"] = link.bit_error_rate
            entries.append(entry)
        return entries

    def _mac(self) -> dict[str, Any]:
        return resolve_mac(self.spec.mac)


@dataclass(frozen=True)
class Placement:
    """The outcome of drawing a random generator's placements until the
    medium finds one connected."""

    attempt: int | None  # the first connected draw (0-based), None if none of those searched
    positions: tuple[Position, ...]  # that draw: a position for every generated node
    searched: int  # draws the medium examined
    largest: int  # the most nodes that reached each other in one draw


# Draws the medium judges in one request: few at first (most seeds connect
# within a few draws), then growing, so that a thousand draws take a handful
# of requests.
FIRST_BATCH = 4
BATCH_GROWTH = 4


@functools.lru_cache(maxsize=64)
def connected_placement(config_json: str, targets: tuple[int, ...], n: int, low: tuple[float, float],
                        high: tuple[float, float], seed: int) -> Placement:
    """The first draw of `random.Random(seed)` (n uniform positions per draw,
    in the same order as ever, so a seed keeps its placement) that, put at the
    `targets` of the configuration, connects every node at time 0 as the
    medium computes it, among the most draws a file may ask for
    (`limits.placement_attempts`): the generator takes it if it is within its
    `max_attempts`, and otherwise its error can say how many would do.
    Cached: several plans (a file's scales) resolve the same topology."""
    config = json.loads(config_json)
    fixed = [node["position"] for node in config["nodes"]]
    placed = set(targets)
    # Without targets every draw gives the same configuration: one look decides.
    limit = limits.placement_attempts(n) if targets else 1
    rng = random.Random(seed)
    searched, largest, batch = 0, 0, FIRST_BATCH
    while searched < limit:
        draws = [generators.uniform(rng, n, low, high) for _ in range(min(batch, limit - searched))]
        candidates = [[list(draw[i]) if i in placed else fixed[i] for i in range(len(fixed))] for draw in draws]
        first, sizes = medium.first_connected(config_json, candidates)
        largest = max([largest, *sizes])
        if first is not None:
            return Placement(searched + first, tuple(draws[first]), searched + first + 1, largest)
        searched += len(draws)
        batch *= BATCH_GROWTH
    return Placement(None, (), searched, largest)


def resolve_mac(mac: Any) -> dict[str, Any]:
    """`dcf` or `{tdma: {slot: ...}}` -> section 1's mac object."""
    if isinstance(mac, TdmaMac):
        slot = mac.tdma.slot if mac.tdma is not None else "auto"
        return {"kind": "tdma", "slot_ns": 0 if slot == "auto" else slot}
    return {"kind": "dcf"}


def mac_address(index: int) -> str:
    """Locally administered, unicast: 02:00 then the 1-based node number."""
    number = (index + 1).to_bytes(4, "big")
    return "02:00:" + ":".join(f"{byte:02x}" for byte in number)
