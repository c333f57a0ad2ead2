"""Removing a lab: everything its state file records, in an order that works
whether the lab is healthy or was killed with SIGKILL halfway."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
from pathlib import Path

from . import arptable, procs, rundirs
from .errors import LabError
from .state import BY_NETNS, NETNS_DIR, RUN_ROOT, STATE_FILE, LabState, read_state

NODE_PROCESS_GRACE = 1.0  # seconds between SIGTERM and SIGKILL for programs in the nodes
MEDIUM_GRACE = 10.0  # the medium deletes its namespaces on SIGTERM


def teardown(run_dir: Path, medium_grace: float = MEDIUM_GRACE) -> list[str]:
    """Stop and remove everything recorded for the lab in `run_dir`; returns
    what was removed, one line each. Idempotent."""
    report: list[str] = []
    if run_dir.is_dir() and not (run_dir / STATE_FILE).exists() and any(run_dir.iterdir()):
        return [f"{run_dir} has no {STATE_FILE}: not a meshemu lab, left alone"]
    try:
        state: LabState | None = read_state(run_dir)
    except LabError as exc:
        state = None  # broken, or a lab that crashed before its state was written
        if run_dir.exists():
            report.append(f"{exc}: removing {run_dir} only")
    if state is not None:
        medium = state.medium()
        inodes = _netns_inodes(state)
        _stop_node_processes(state, inodes, {medium.pid} if medium else set(), report)
        stopping = medium is not None and procs.signal_process(medium.id, signal.SIGTERM)
        # The hosts files serve only programs in the nodes, all stopped now:
        # removed while the medium takes its namespaces down on the other core.
        _remove_files(state, report)
        if stopping:
            procs.stop_signalled([medium.id], medium_grace)
            report.append(f"stopped the medium (pid {medium.pid})")
        _delete_iptables_rules(state, report)
        _delete_namespaces(state, report)
        _remove_by_netns_links(run_dir, report)
    if run_dir.exists():
        shutil.rmtree(run_dir, ignore_errors=True)
        report.append(f"removed {run_dir}")
    try:
        limits = arptable.update()  # after the state is gone: the lab no longer counts
    except LabError as exc:
        limits = str(exc)
    if limits:
        report.append(limits)
    rundirs.release()
    return report


def _netns_inodes(state: LabState) -> set[int]:
    inodes = set(state.netns_inodes.values())
    for name in state.namespaces:
        if name in state.netns_inodes:
            continue  # recorded once it existed; a namespace keeps its inode
        inode = procs.netns_inode(NETNS_DIR / name)
        if inode is not None:
            inodes.add(inode)
    return inodes


def _stop_node_processes(state: LabState, inodes: set[int], exclude: set[int], report: list[str]) -> None:
    """The recorded processes, then anything else still inside the lab's
    namespaces (a few rounds: a dying program may have started another)."""
    recorded = [record.id for record in state.processes if record.role != "medium"]
    stopped = procs.stop(recorded, NODE_PROCESS_GRACE)
    for _ in range(5):
        found = procs.processes_in_netns(inodes, exclude) if inodes else []
        if not found:
            break
        stopped += procs.stop(found, NODE_PROCESS_GRACE)
    for process in stopped:
        report.append(f"stopped process {process.pid}")


def _delete_iptables_rules(state: LabState, report: list[str]) -> None:
    for rule in state.iptables:
        if rule.netns is not None and not (NETNS_DIR / rule.netns).exists():
            continue  # its namespace is gone, and the rule with it
        prefix = ["ip", "netns", "exec", rule.netns] if rule.netns is not None else []
        argv = prefix + [rule.binary, "-t", rule.table, "-D", rule.chain, *rule.rule]
        if subprocess.run(argv, capture_output=True, check=False).returncode == 0:
            where = f"in {rule.netns}" if rule.netns else "on the host"
            report.append(f"deleted iptables rule {where}: -t {rule.table} -A {rule.chain} {' '.join(rule.rule)}")


def _delete_namespaces(state: LabState, report: list[str]) -> None:
    for name in state.namespaces:
        path = NETNS_DIR / name
        if not path.exists():
            continue
        result = subprocess.run(["ip", "netns", "delete", name], capture_output=True, text=True, check=False)
        if result.returncode != 0 or path.exists():
            # `ip` refused (e.g. a stale file that is no mount): unmount, unlink.
            subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=False)
            try:
                path.unlink()
            except FileNotFoundError:
                pass
        report.append(f"deleted namespace {name}")


def _remove_by_netns_links(run_dir: Path, report: list[str]) -> None:
    """The medium's /run/meshemu/by-netns/<inode> links into this lab."""
    if not BY_NETNS.is_dir():
        return
    for link in BY_NETNS.iterdir():
        if link.is_symlink() and Path(os.readlink(link)).is_relative_to(run_dir):
            link.unlink(missing_ok=True)
            report.append(f"removed {link}")


def _remove_files(state: LabState, report: list[str]) -> None:
    """One system call each (thousands for a large lab): unlink refuses
    directories, rmdir directories that are not empty (holding files that are
    not ours)."""
    for name in state.files:
        try:
            os.unlink(name)
        except (FileNotFoundError, IsADirectoryError):
            continue
        report.append(f"removed {name}")
    for name in reversed(state.dirs):  # recorded outer first: remove inner first
        try:
            os.rmdir(name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            if exc.errno != errno.ENOTEMPTY:
                raise
            continue
        report.append(f"removed {name}")


def remove_dangling_by_netns_links(report: list[str]) -> None:
    """Links left by a medium whose lab directory is gone."""
    if not BY_NETNS.is_dir():
        return
    for link in BY_NETNS.iterdir():
        if link.is_symlink() and not link.exists() and Path(os.readlink(link)).is_relative_to(RUN_ROOT):
            link.unlink(missing_ok=True)
            report.append(f"removed {link}")
    rundirs.release()
