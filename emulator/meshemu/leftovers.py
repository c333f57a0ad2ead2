"""What a lab could leave on the host, as a snapshot to compare before and
after: the host's interfaces, addresses, routes, policy rules, iptables
rules and network sysctls (a lab must never change them), and what a lab
creates and must remove (named namespaces, their mounts, processes of ours
or inside other network namespaces, files under /run/meshemu and
/etc/netns). Used by the isolation and cleanup tests and by the soak
benchmark (`python -m meshemu.bench.soak`)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from . import rundirs
from .state import NETNS_DIR, RUN_ROOT

REPO = Path(__file__).resolve().parents[2]
NETNS_CONFIG = Path("/etc/netns")

# What a node sets in its own namespace (medium/src/netns.rs), read on the host,
# and the ARP table limits a lab raises while it is up (arptable.py).
SYSCTL_DIRS = ["/proc/sys/net/ipv4/conf/all", "/proc/sys/net/ipv4/conf/default", "/proc/sys/net/ipv6/conf/all",
               "/proc/sys/net/ipv6/conf/default", "/proc/sys/net/ipv4/neigh/default"]
SYSCTL_FILES = ["/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv4/ip_default_ttl"]
# Chain policies carry packet and byte counters, which the host's own traffic moves.
COUNTERS = re.compile(r"\[\d+:\d+\]")
# Addresses and routes from DHCP or router advertisements count their lifetimes down.
LIFETIMES = re.compile(r"(valid_lft|preferred_lft|expires) \d+sec")


def snapshot() -> dict[str, object]:
    """Every part by name; two snapshots are equal when nothing was left."""
    return host() | {
        "namespaces": _names(NETNS_DIR),
        "mounts": _mounts(),
        "processes": _processes(),
        "files": _files(RUN_ROOT) + _files(NETNS_CONFIG),
    }


def host() -> dict[str, object]:
    """The host's own network configuration, which a lab never changes, not
    even while it runs."""
    return {
        "links": _output("ip", "-o", "link", "show"),
        "addresses": LIFETIMES.sub(r"\1", _output("ip", "-o", "address", "show")),
        "routes": LIFETIMES.sub(r"\1", _output("ip", "route", "show", "table", "all")),
        "routes6": LIFETIMES.sub(r"\1", _output("ip", "-6", "route", "show", "table", "all")),
        "rules": _output("ip", "rule", "show"),
        "rules6": _output("ip", "-6", "rule", "show"),
        "iptables": _rules("iptables-save"),
        "ip6tables": _rules("ip6tables-save"),
        "sysctls": _sysctls(),
    }


def differences(before: dict[str, object], after: dict[str, object]) -> dict[str, object]:
    """The parts that differ, each with what the later snapshot has that the
    earlier lacks and the reverse (lists), or both values (the rest)."""
    changed: dict[str, object] = {}
    for key, old in before.items():
        new = after[key]
        if old == new:
            continue
        if isinstance(old, list) and isinstance(new, list):
            changed[key] = {"added": [x for x in new if x not in old], "removed": [x for x in old if x not in new]}
        else:
            changed[key] = {"before": old, "after": new}
    return changed


def _output(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout


def _rules(program: str) -> list[str]:
    """iptables-save without its dated comments and counters."""
    return [COUNTERS.sub("", line) for line in _output(program).splitlines() if not line.startswith("#")]


def _sysctls() -> dict[str, str]:
    files = list(SYSCTL_FILES)
    for directory in SYSCTL_DIRS:
        files += [str(path) for path in sorted(Path(directory).iterdir())]
    values = {}
    for file in files:
        try:
            values[file] = Path(file).read_text()
        except OSError:
            continue  # write-only or refused (stable_secret)
    return values


def _names(directory: Path) -> list[str]:
    return sorted(entry.name for entry in directory.iterdir()) if directory.is_dir() else []


def _files(root: Path) -> list[str]:
    if not root.exists():
        return []
    return sorted(str(path) for path in [root, *root.rglob("*")])


def _mounts() -> list[str]:
    """Mount points under the directories a lab mounts on (namespace files, rundirs.py's tmpfs)."""
    roots = (NETNS_DIR, RUN_ROOT, NETNS_CONFIG)
    return sorted(str(point) for point, _, _ in rundirs.mounts() if any(point.is_relative_to(root) for root in roots))


def _processes() -> list[str]:
    """Processes in a network namespace other than ours, or running one of
    our programs (the medium and the daemons run from the repository's
    build), as "pid command"; kernel threads have neither."""
    own = os.stat("/proc/self/ns/net").st_ino
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            netns = (entry / "ns" / "net").stat().st_ino
            exe = os.readlink(entry / "exe")
            command = (entry / "comm").read_text().strip()
        except OSError:
            continue  # gone, or a kernel thread
        if netns != own or exe.startswith(str(REPO) + "/"):
            found.append(f"{entry.name} {command}")
    return sorted(found, key=lambda line: int(line.split()[0]))
