"""The state file of a lab: `/run/meshemu/<lab>/state.json`.

It is written *before* anything is created and updated as things come into
being, so that `meshemu cleanup` can remove exactly what meshemu made even
after every process of the lab was killed with SIGKILL. Writes are atomic
(temporary file + rename) and serialised by an flock on `state.lock`.

Format (version 1):
    lab, topology (path or null), run_dir, created (unix time),
    namespaces    [netns names the medium creates],
    netns_inodes  {netns name: inode}, once they exist (finds processes in
                  them even after the namespace files are gone),
    files, dirs   [paths we create outside run_dir; dirs only if we made them],
    processes     [{pid, start_time, role: "medium" | "node", node, argv}],
    iptables      [{netns (null = the host), table, chain, rule: [args], binary}]:
                  rules to delete at cleanup (daemons add theirs with
                  `record_iptables_rules`),
    arp_entries   the room the lab's nodes need in the host's ARP table
                  (arptable.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from .errors import LabError
from .procs import ProcessId

RUN_ROOT = Path("/run/meshemu")
NETNS_DIR = Path("/run/netns")  # where `ip netns` and the medium name namespaces
BY_NETNS = RUN_ROOT / "by-netns"
STATE_FILE = "state.json"
LOCK_FILE = "state.lock"
VERSION = 1


@dataclass
class ProcessRecord:
    pid: int
    start_time: int
    role: str  # "medium" or "node"
    node: str | None = None
    argv: list[str] = field(default_factory=list)

    @property
    def id(self) -> ProcessId:
        return ProcessId(self.pid, self.start_time)


@dataclass
class IptablesRule:
    netns: str | None  # None: the host's own namespace
    table: str
    chain: str
    rule: list[str]  # the match and target arguments, as given to -A
    binary: str = "iptables"  # or iptables-legacy, ip6tables


@dataclass
class LabState:
    lab: str
    run_dir: str
    topology: str | None = None
    created: float = field(default_factory=time.time)
    namespaces: list[str] = field(default_factory=list)
    netns_inodes: dict[str, int] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    processes: list[ProcessRecord] = field(default_factory=list)
    iptables: list[IptablesRule] = field(default_factory=list)
    arp_entries: int = 0
    version: int = VERSION

    def to_json(self) -> dict[str, Any]:
        # The records' own fields, not asdict's deep copies: a lab of 169
        # nodes with daemons holds thousands of records, written at each update.
        return {**vars(self), "processes": [vars(record) for record in self.processes],
                "iptables": [vars(rule) for rule in self.iptables]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "LabState":
        if data.get("version") != VERSION:
            raise ValueError(f"unknown state version {data.get('version')!r}")
        data = dict(data)
        data["processes"] = [ProcessRecord(**record) for record in data.get("processes", [])]
        data["iptables"] = [IptablesRule(**rule) for rule in data.get("iptables", [])]
        return cls(**data)

    def medium(self) -> ProcessRecord | None:
        return next((record for record in self.processes if record.role == "medium"), None)


@contextmanager
def host_lock() -> Iterator[None]:
    """Held while a lab changes what the labs share on the host (the tmpfs
    mounts of rundirs.py, RUN_ROOT, the ARP table's limits): labs come and
    go at once (meshemu run --jobs).
    An flock on /run itself, which is never removed (a lock file would be
    left behind, and one under RUN_ROOT goes with it)."""
    lock = os.open(RUN_ROOT.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)


def run_dir_of(lab: str) -> Path:
    return RUN_ROOT / lab


def lab_names() -> list[str]:
    """Labs with a state file (running or left over). Other directories under
    /run/meshemu are not labs of ours (e.g. the medium's own benchmarks)."""
    if not RUN_ROOT.is_dir():
        return []
    return sorted(entry.name for entry in RUN_ROOT.iterdir() if (entry / STATE_FILE).is_file())


def dirs_without_state() -> list[Path]:
    """Directories under RUN_ROOT with no state file: a lab killed between
    making its directory and writing its state leaves one (empty; teardown
    leaves a directory with files but no state alone)."""
    if not RUN_ROOT.is_dir():
        return []
    return sorted(entry for entry in RUN_ROOT.iterdir()
                  if entry.is_dir() and entry != BY_NETNS and not (entry / STATE_FILE).exists())


def chosen_lab(name: str | None) -> str:
    """The lab named, or without a name the only lab up; refused with the
    labs there are when neither fits."""
    names = lab_names()
    if name is None:
        if not names:
            raise LabError("no lab is up")
        if len(names) > 1:
            raise LabError(f"several labs are up ({', '.join(names)}): name one")
        return names[0]
    if name not in names:
        raise LabError(f"lab {name!r} is not up (labs up: {', '.join(names) or 'none'})")
    return name


def read_state(run_dir: Path) -> LabState:
    path = run_dir / STATE_FILE
    try:
        return LabState.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        raise LabError(f"no state file {path}") from None
    except (OSError, ValueError, TypeError) as exc:
        raise LabError(f"unreadable state file {path}: {exc}") from None


def write_state(state: LabState) -> None:
    """Atomically replace the state file (one line: json's C encoder, which
    `indent` would turn off)."""
    path = Path(state.run_dir) / STATE_FILE
    temporary = path.with_name(f".{STATE_FILE}.{os.getpid()}.tmp")
    with open(temporary, "w") as file:
        file.write(json.dumps(state.to_json()))
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)


@contextmanager
def updating(run_dir: Path) -> Iterator[LabState]:
    """Read-modify-write of the state under its lock."""
    if not (run_dir / STATE_FILE).is_file():
        raise LabError(f"no state file in {run_dir}: the lab is not up")
    with open(run_dir / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = read_state(run_dir)
        yield state
        write_state(state)


def record_process(run_dir: Path, record: ProcessRecord) -> None:
    with updating(run_dir) as state:
        state.processes.append(record)


def record_iptables_rules(run_dir: Path, rules: list[IptablesRule]) -> None:
    """Record rules *before* adding them, so that cleanup deletes them (as
    many at once as can be: each update rewrites the whole state)."""
    if not rules:
        return
    with updating(run_dir) as state:
        state.iptables.extend(rules)
