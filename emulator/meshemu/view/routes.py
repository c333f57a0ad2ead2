"""Which way a flow goes now: hop by hop through the nodes' own kernel
routing tables (main table, longest prefix first), each read with one
`ip -n NETNS -j route show` (no shell, no second exec through `ip netns
exec`). Only the tables of the nodes on the flows' paths are read, once
per round however many flows cross them.

A route with a realm is the catch-all of an on-demand daemon (aodvd,
copasd: routing/aodv/README.md, "Data path"): the daemon holds what takes
it while it searches, so for the view the flow has no route there.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from ..errors import MeshemuError
from ..lab import Lab

IP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class NodePath:
    nodes: tuple[str, ...]  # from the source on, as far as routes lead
    reached: bool           # the last node is the destination


@dataclass(frozen=True)
class Route:
    network: ipaddress.IPv4Network
    gateway: str | None
    ends: bool  # no way on: an on-demand daemon's catch-all, or unreachable, blackhole, prohibit


def parse_table(routes: list[dict[str, Any]]) -> list[Route]:
    """`ip -j route show` → IPv4 routes, longest prefix first."""
    table = []
    for entry in routes:
        dst = entry.get("dst", "")
        try:
            network = ipaddress.IPv4Network("0.0.0.0/0" if dst == "default" else dst, strict=False)
        except ValueError:
            continue
        ends = entry.get("type", "unicast") != "unicast" or "to" in entry.get("flow", {})
        table.append(Route(network, entry.get("gateway"), ends))
    return sorted(table, key=lambda route: -route.network.prefixlen)


def lookup(table: list[Route], address: str) -> Route | None:
    ip = ipaddress.IPv4Address(address)
    return next((route for route in table if ip in route.network), None)


class RouteReader:
    """Paths of flows in a lab, from its nodes' routing tables."""

    def __init__(self, lab: Lab):
        ip = shutil.which("ip")
        if ip is None:
            raise MeshemuError("`ip` (iproute2) is missing: the view reads routes with it")
        self.ip = ip
        self.lab = lab
        self.node_of_ip = {node.ip: node.name for node in lab}
        self.tables_read = 0  # for the benchmark: how many `ip` calls so far

    def paths(self, flows: Iterable[tuple[str, str]]) -> list[NodePath]:
        """The path of each (source, destination) pair now."""
        tables: dict[str, list[Route]] = {}

        def table_of(node: str) -> list[Route]:
            if node not in tables:
                tables[node] = self._read(node)
            return tables[node]

        return [trace(src, dst, self.lab[dst].ip, table_of, self.node_of_ip) for src, dst in flows]

    def _read(self, node: str) -> list[Route]:
        self.tables_read += 1
        argv = [self.ip, "-n", self.lab[node].netns, "-j", "route", "show"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return []
        if done.returncode != 0:
            return []  # the namespace went away (lab down): no route from there
        return parse_table(json.loads(done.stdout or "[]"))


def trace(src: str, dst: str, dst_ip: str, table_of: Callable[[str], list[Route]],
          node_of_ip: dict[str, str]) -> NodePath:
    """Follow the routes from `src` towards `dst_ip`; a path stops where a
    node has no route, where the next hop is no node of the lab, or where it
    would loop."""
    nodes = [src]
    while nodes[-1] != dst:
        route = lookup(table_of(nodes[-1]), dst_ip)
        if route is None or route.ends:
            return NodePath(tuple(nodes), False)
        next_hop = node_of_ip.get(route.gateway or dst_ip)
        if next_hop is None or next_hop in nodes:
            return NodePath(tuple(nodes), False)
        nodes.append(next_hop)
    return NodePath(tuple(nodes), True)
