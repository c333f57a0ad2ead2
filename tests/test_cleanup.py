"""Teardown from the state file alone, as after a crash (root: creates its
own namespaces and processes, without the medium)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import namespaces
from meshemu import leftovers, procs, rundirs
from meshemu.state import IptablesRule, LabState, ProcessRecord, RUN_ROOT, read_state, record_iptables_rules, write_state
from meshemu.teardown import teardown

pytestmark = pytest.mark.root


@pytest.fixture
def crashed_lab():
    """A lab as a SIGKILLed medium leaves it: namespaces bound under
    /run/netns, hosts files, a program running in a node, a "medium" process,
    an iptables rule in a node, and the state file that records them."""
    name = f"tc{os.getpid() % 100000}"
    run_dir = RUN_ROOT / name
    run_dir.mkdir(parents=True)
    netns = [f"{name}-n0", f"{name}-n1"]
    state = LabState(name, str(run_dir), namespaces=netns)
    if not Path("/etc/netns").exists():
        state.dirs.append("/etc/netns")
    for ns in netns:
        state.dirs.append(f"/etc/netns/{ns}")
        state.files.append(f"/etc/netns/{ns}/hosts")
    write_state(state)
    children = []
    try:
        for ns in netns:
            subprocess.run(["ip", "netns", "add", ns], check=True)
            Path(f"/etc/netns/{ns}").mkdir(parents=True)
            Path(f"/etc/netns/{ns}/hosts").write_text("10.0.0.1 n0\n")
        rule = IptablesRule(netns[0], "filter", "INPUT", ["-p", "udp", "--dport", "654", "-j", "ACCEPT"])
        record_iptables_rules(run_dir, [rule])  # as a daemon does, before adding it
        state = read_state(run_dir)
        subprocess.run(["ip", "netns", "exec", netns[0], "iptables", "-t", "filter", "-A", "INPUT", *rule.rule],
                       check=True)
        # a recorded program in n0 and an unrecorded one in n1 (started by hand)
        recorded = subprocess.Popen(["ip", "netns", "exec", netns[0], "sleep", "600"], start_new_session=True)
        stray = subprocess.Popen(["ip", "netns", "exec", netns[1], "sleep", "600"], start_new_session=True)
        fake_medium = subprocess.Popen(["sleep", "600"], start_new_session=True)
        children += [recorded, stray, fake_medium]
        time.sleep(0.2)  # let `ip netns exec` enter the namespaces
        state.processes.append(ProcessRecord(recorded.pid, procs.start_time(recorded.pid), "node", "n0", ["sleep"]))
        state.processes.append(ProcessRecord(fake_medium.pid, procs.start_time(fake_medium.pid), "medium"))
        state.netns_inodes = {ns: procs.netns_inode(f"/run/netns/{ns}") for ns in netns}
        write_state(state)
        yield name, run_dir, state, children
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
            child.wait()
        teardown(run_dir)


def test_teardown_removes_everything_recorded(crashed_lab):
    name, run_dir, state, children = crashed_lab
    report = teardown(run_dir)
    for child in children:
        assert child.wait(timeout=5) is not None
    assert not any(ns.startswith(f"{name}-") for ns in namespaces())
    assert not any(Path(f"/etc/netns/{ns}").exists() for ns in state.namespaces)
    assert not run_dir.exists()
    assert f"{name}-n0" not in Path("/proc/self/mountinfo").read_text()
    assert f"stopped the medium (pid {children[2].pid})" in report
    assert f"stopped process {children[1].pid}" in report  # found by its namespace, not recorded
    assert f"deleted namespace {name}-n0" in report
    assert any(line.startswith(f"deleted iptables rule in {name}-n0") for line in report)
    assert teardown(run_dir) == []  # idempotent


def test_a_reused_pid_is_never_killed(crashed_lab):
    name, run_dir, state, children = crashed_lab
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        # The state claims the bystander's PID, but with another start time:
        # the recorded process is gone and its PID was reused.
        state.processes.append(ProcessRecord(bystander.pid, procs.start_time(bystander.pid) + 1, "node", "n1"))
        write_state(state)
        teardown(run_dir)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_cli_cleanup_reports_and_is_idempotent(crashed_lab):
    name, run_dir, state, children = crashed_lab
    for child in children:  # kill -9 everything, as after a crash
        child.kill()
        child.wait()
    first = subprocess.run([sys.executable, "-m", "meshemu", "cleanup", name], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert f"deleted namespace {name}-n1" in first.stdout
    assert f"removed {run_dir}" in first.stdout
    second = subprocess.run([sys.executable, "-m", "meshemu", "cleanup", name], capture_output=True, text=True)
    assert second.returncode == 0 and second.stdout.strip() == "nothing to clean up"
    assert not any(ns.startswith(f"{name}-") for ns in namespaces())


def test_wait_gone_returns_at_exit_and_names_the_survivors():
    """wait_gone sleeps on pidfds: an exited process (a zombie not reaped
    yet counts as gone) ends the wait, a running one is returned after the
    timeout, and a recorded start time that does not match is a process
    that is gone already."""
    quick = subprocess.Popen(["sleep", "0.1"])
    slow = subprocess.Popen(["sleep", "600"])
    try:
        quick_id, slow_id = procs.identify(quick.pid), procs.identify(slow.pid)
        assert procs.wait_gone([quick_id], 10) == []
        assert quick.poll() is not None  # it was a zombie until this reaped it
        assert procs.wait_gone([slow_id], 0.2) == [slow_id]
        reused = procs.ProcessId(slow.pid, slow_id.start_time + 1)
        assert procs.wait_gone([reused], 10) == []
        assert slow.poll() is None
    finally:
        slow.kill()
        slow.wait()


def test_cli_cleanup_removes_a_lab_directory_its_state_never_reached():
    """A runner killed between making its lab's directory and writing the
    lab's state leaves an empty directory, and the tmpfs rundirs.py mounted
    for it where /run is a disk's: `meshemu cleanup` removes both."""
    before = leftovers.snapshot()
    run_dir = RUN_ROOT / f"tn{os.getpid() % 100000}"
    rundirs.make_run_dir(run_dir)
    cleanup = subprocess.run([sys.executable, "-m", "meshemu", "cleanup"], capture_output=True, text=True)
    assert cleanup.returncode == 0, cleanup.stderr
    assert f"removed {run_dir}" in cleanup.stdout
    assert leftovers.differences(before, leftovers.snapshot()) == {}
