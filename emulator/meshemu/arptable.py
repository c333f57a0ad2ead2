"""Room in the host's ARP table for the labs that are up.

Linux keeps one IPv4 neighbour (ARP) table for the whole host: the entries
of every network namespace count against the limits
net.ipv4.neigh.default.gc_thresh2 and gc_thresh3, which exist in the
host's own namespace only (512 and 1024 by default). Above gc_thresh2 the
kernel evicts entries a few seconds old, so nodes ARP again; above
gc_thresh3 it refuses new entries ("neighbor table overflow" in the kernel
log) and drops the packets that needed them. A node holds an entry for each
neighbour it talks to, so a 300-node grid alone needs more than 1024.

So each lab records in its state how many entries its nodes may hold
(`arp_entries`, from `entries()`), and `update()` sets the two limits for the sum over the labs
that are up, on top of what the host had. When no lab needs more than the
host's own limits, they are put back as they were: a lab leaves the host as
it found it, also after `meshemu cleanup`.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import LabError
from .state import RUN_ROOT, host_lock, lab_names, read_state

SYSCTLS = Path("/proc/sys/net/ipv4/neigh/default")
SAVED = RUN_ROOT / "arp-limits.json"  # the host's own limits while ours are set
# Entries a node may hold at once: its neighbours and the nodes that ask for
# it (a grid node has 4 neighbours; a mobile node meets others over time).
ENTRIES_PER_NODE = 16
# Room kept for the host's own entries and other namespaces'.
HOST_ENTRIES = 128


@dataclass(frozen=True)
class Limits:
    gc_thresh2: int
    gc_thresh3: int

    @classmethod
    def read(cls) -> "Limits":
        return cls(*(int((SYSCTLS / name).read_text()) for name in ("gc_thresh2", "gc_thresh3")))

    def write(self) -> None:
        # gc_thresh2 stays at or below gc_thresh3 at every step: raise 3 first, lower it last.
        order = ("gc_thresh3", "gc_thresh2") if self.gc_thresh3 >= Limits.read().gc_thresh3 else \
            ("gc_thresh2", "gc_thresh3")
        for name in order:
            try:
                (SYSCTLS / name).write_text(str(getattr(self, name)))
            except OSError as exc:
                raise LabError(f"cannot set {SYSCTLS / name} to {getattr(self, name)} (the room the labs up need "
                               f"in the host's ARP table): {exc.strerror or exc}") from None


def entries(nodes: int) -> int:
    """The ARP entries a lab of `nodes` nodes may hold at once."""
    return nodes * min(max(nodes - 1, 0), ENTRIES_PER_NODE)


def limits_for(host: Limits, demand: int) -> Limits:
    """The limits that leave room for `demand` entries of labs beside the
    host's own: evictions start only above all of them, refusals at twice
    that. The host's limits where they suffice."""
    needed = demand + HOST_ENTRIES
    if needed <= host.gc_thresh2:
        return host
    return Limits(needed, max(host.gc_thresh3, 2 * needed))


def update() -> str | None:
    """Set the limits for the labs that are up now (their states' `arp_entries`),
    or put the host's back; what changed, if anything."""
    with host_lock():
        current = Limits.read()
        host = Limits(**json.loads(SAVED.read_text())) if SAVED.exists() else current
        wanted = limits_for(host, demand())
        if wanted != current:
            if wanted != host and not SAVED.exists():
                _save(host)
            wanted.write()
        if wanted == host:
            SAVED.unlink(missing_ok=True)
    if wanted == current:
        return None
    verb = "put back" if wanted == host else "set"
    return (f"{verb} the host's ARP table limits: net.ipv4.neigh.default.gc_thresh2 {current.gc_thresh2} -> "
            f"{wanted.gc_thresh2}, gc_thresh3 {current.gc_thresh3} -> {wanted.gc_thresh3}")


def demand() -> int:
    """The entries the labs that are up may hold, by their states."""
    total = 0
    for name in lab_names():
        try:
            total += read_state(RUN_ROOT / name).arp_entries
        except LabError:
            continue  # being removed
    return total


def _save(host: Limits) -> None:
    temporary = SAVED.with_name(f".{SAVED.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(asdict(host)))
    os.replace(temporary, SAVED)
