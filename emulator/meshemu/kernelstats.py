"""The kernel's own counters in each node: the MIBs of /proc/net/snmp (Ip,
Icmp, Tcp, Udp, ...) and /proc/net/netstat (TcpExt, IpExt), under the
kernel's names so that `nstat`'s and RFC 4293's definitions apply.

They count what the radio cannot see: packets a node's kernel dropped for
want of a route (IpExt InNoRoutes for packets to forward, Ip OutNoRoutes
for its own) or discarded (Ip InDiscards, OutDiscards), the datagrams each
relay forwarded (Ip ForwDatagrams), and how a sender's TCP recovered
(TcpExt TCPTimeouts, TCPSpuriousRTOs, TCPLossUndo, ...).

A thread of its own enters each namespace in turn (setns acts on the
calling thread alone) and reads the files through /proc/thread-self,
starting no process: about 0.1 ms a node (`Lab.kernel_counters()` timed
20 times on idle labs of topologies/grid13.yaml, 17.5-19.3 ms, and
random100.yaml, 10.1-11.3 ms, alone on the machine, 2026-11-28). A run
reads them at the window's two edges only.
"""

from __future__ import annotations

import ctypes
import os
import threading
from typing import Any

from .errors import LabError
from .state import NETNS_DIR

CLONE_NEWNET = 0x40000000
FILES = ("snmp", "netstat")

# Settings and levels, not counts: a difference of two readings means nothing.
GAUGES = frozenset({"Forwarding", "DefaultTTL", "RtoAlgorithm", "RtoMin", "RtoMax", "MaxConn", "CurrEstab"})

Counters = dict[str, dict[str, int]]  # MIB group -> counter name -> value

_libc = ctypes.CDLL(None, use_errno=True)


def parse(text: str) -> Counters:
    """The `Group: name name ...` / `Group: value value ...` line pairs of
    /proc/net/snmp or /proc/net/netstat, with only the non-zero counters (most
    are zero in a node, and a missing one reads as zero)."""
    groups: Counters = {}
    lines = text.splitlines()
    if len(lines) % 2:
        raise ValueError(f"{len(lines)} lines: names and values do not pair up")
    for names, values in zip(lines[::2], lines[1::2]):
        group, _, keys = names.partition(":")
        other, _, numbers = values.partition(":")
        keys_list, numbers_list = keys.split(), numbers.split()
        if group != other or len(keys_list) != len(numbers_list):
            raise ValueError(f"the lines of {group!r} and {other!r} do not pair up")
        counters = {key: int(number) for key, number in zip(keys_list, numbers_list) if number != "0"}
        if counters:
            groups.setdefault(group, {}).update(counters)
    return groups


def _enter(netns: str) -> None:
    fd = os.open(NETNS_DIR / netns, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))
    finally:
        os.close(fd)


def _read_here() -> Counters:
    counters: Counters = {}
    for file in FILES:
        with open(f"/proc/thread-self/net/{file}", encoding="ascii") as handle:
            for group, values in parse(handle.read()).items():
                counters.setdefault(group, {}).update(values)
    return counters


def read(namespaces: dict[str, str]) -> dict[str, Counters]:
    """{node: counters} for {node: namespace name under /run/netns}."""
    found: dict[str, Counters] = {}
    failed: list[str] = []

    def work() -> None:
        for node, netns in namespaces.items():
            try:
                _enter(netns)
                found[node] = _read_here()
            except (OSError, ValueError) as error:
                failed.append(f"{node} (namespace {netns}): {error}")
                return

    thread = threading.Thread(target=work, name="kernel counters")
    thread.start()
    thread.join()
    if failed:
        raise LabError(f"reading the kernel's counters of {failed[0]}")
    return found


def delta(before: Counters, after: Counters) -> Counters:
    """The counters that changed between two readings of one node."""
    changed: Counters = {}
    for group, counters in after.items():
        earlier = before.get(group, {})
        moved = {name: value - earlier.get(name, 0) for name, value in counters.items()
                 if name not in GAUGES and value != earlier.get(name, 0)}
        if moved:
            changed[group] = moved
    return changed


def summed(per_node: list[Counters]) -> Counters:
    total: Counters = {}
    for counters in per_node:
        for group, values in counters.items():
            into = total.setdefault(group, {})
            for name, value in values.items():
                into[name] = into.get(name, 0) + value
    return total


def metrics(before: dict[str, Counters], after: dict[str, Counters]) -> dict[str, Any]:
    """Per node, what changed over an interval; `total`: the sums over nodes."""
    nodes = {node: delta(before.get(node, {}), counters) for node, counters in after.items()}
    return {"nodes": nodes, "total": summed(list(nodes.values()))}
