"""Processes by PID, safely: a PID is only signalled after its start time
(field 22 of /proc/PID/stat) matches the one recorded, through a pidfd, so a
reused PID is never hit. Never by name."""

from __future__ import annotations

import os
import select
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessId:
    """A process as recorded: its PID and its start time (clock ticks after boot)."""

    pid: int
    start_time: int


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name: [state, ppid, ...],
    so field N of proc(5) is at index N - 3. None if the process is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may itself contain ") ".
    return text[text.rindex(")") + 2:].split()


def start_time(pid: int) -> int | None:
    fields = stat_fields(pid)
    return int(fields[22 - 3]) if fields else None


def identify(pid: int) -> ProcessId | None:
    started = start_time(pid)
    return ProcessId(pid, started) if started is not None else None


def is_alive(process: ProcessId) -> bool:
    """Still running (a zombie counts as gone: it holds no resources)."""
    fields = stat_fields(process.pid)
    return fields is not None and int(fields[22 - 3]) == process.start_time and fields[0] not in ("Z", "X")


def signal_process(process: ProcessId, signum: int) -> bool:
    """Send `signum` if `process` is still the one recorded; True if sent."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (ProcessLookupError, OSError):
        return False
    try:
        # Checked after opening the pidfd: the pidfd pins this very process.
        if not is_alive(process):
            return False
        signal.pidfd_send_signal(pidfd, signum)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(pidfd)


def wait_gone(processes: list[ProcessId], timeout: float) -> list[ProcessId]:
    """Wait until the processes exit; those still alive after `timeout`.
    Sleeps on their pidfds, which become readable the moment they exit."""
    deadline = time.monotonic() + timeout
    watched: dict[int, ProcessId] = {}
    poller = select.poll()
    try:
        for process in processes:
            try:
                pidfd = os.pidfd_open(process.pid)
            except (ProcessLookupError, OSError):
                continue  # gone
            watched[pidfd] = process
            poller.register(pidfd, select.POLLIN)
        # Checked after opening the pidfds: each pins its process, so a PID
        # reused meanwhile is not mistaken for ours.
        for pidfd, process in list(watched.items()):
            if not is_alive(process):
                poller.unregister(pidfd)
                os.close(pidfd)
                del watched[pidfd]
        while watched:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for pidfd, _ in poller.poll(remaining * 1000):
                poller.unregister(pidfd)
                os.close(pidfd)
                del watched[pidfd]
        return list(watched.values())
    finally:
        for pidfd in watched:
            os.close(pidfd)


def stop(processes: list[ProcessId], grace: float) -> list[ProcessId]:
    """SIGTERM, then SIGKILL whatever is left after `grace` seconds. Returns
    the processes that were signalled (were still running)."""
    signalled = [p for p in processes if signal_process(p, signal.SIGTERM)]
    stop_signalled(signalled, grace)
    return signalled


def stop_signalled(processes: list[ProcessId], grace: float) -> None:
    """The second half of `stop`, for processes sent SIGTERM already: SIGKILL
    whatever is left after `grace` seconds."""
    survivors = wait_gone(processes, grace)
    for process in survivors:
        signal_process(process, signal.SIGKILL)
    wait_gone(survivors, 5.0)


def netns_inode(path: str | Path) -> int | None:
    """The inode of a network namespace file (/run/netns/X, /proc/PID/ns/net)."""
    try:
        return os.stat(path).st_ino
    except (FileNotFoundError, ProcessLookupError, PermissionError, NotADirectoryError):
        return None


def processes_in_netns(inodes: set[int], exclude: set[int] = frozenset()) -> list[ProcessId]:
    """Every process whose network namespace is one of `inodes`."""
    found = []
    own = os.getpid()
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid == own or pid in exclude:
            continue
        if netns_inode(entry / "ns" / "net") in inodes:
            process = identify(pid)
            if process is not None:
                found.append(process)
    return found


# /proc/net/{tcp,udp}[6] socket states: TCP_LISTEN, and TCP_CLOSE, which an
# unconnected bound UDP socket shows.
_LISTENING_STATE = {"tcp": "0A", "udp": "07"}


def listening(pid: int, protocol: str, port: int) -> bool:
    """Whether a socket of `protocol` (tcp, udp) waits on `port` in the network
    namespace of process `pid` (as `ss -l` run there would say), read from
    /proc/PID/net: no program started, so a wait for a server costs next to
    nothing."""
    wanted = f":{port:04X}"
    for table in (protocol, f"{protocol}6"):
        try:
            lines = (PROC / str(pid) / "net" / table).read_text().splitlines()[1:]
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        for line in lines:
            fields = line.split()
            if fields[1].endswith(wanted) and fields[3] == _LISTENING_STATE[protocol]:
                return True
    return False
