"""The VM mode (`meshemu vm`): failure paths without booting, cleanup after
Ctrl-C, SIGTERM and SIGKILL (about 4 s: the VM is stopped while it boots),
and the CI run of the hwsim tests inside the VM (software emulation here:
about 65 s, measured 2026-11-25)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meshemu import procs, vm

from conftest import REPO, ctrl_c_reaches

VM_READY = (vm.CACHE_DIR / "kernel" / "current").is_dir() and vm.shutil.which(vm.QEMU_PROGRAM) is not None
needs_vm = pytest.mark.skipif(not VM_READY, reason="no VM kernel cache or QEMU: run ./setup.sh")


def test_no_kernel_package_is_a_clear_error(tmp_path):
    with pytest.raises(vm.VmError, match=r"no kernel package in .*run ./setup.sh.*linux-image-amd64"):
        vm.run(["true"], cache=tmp_path)


@needs_vm
def test_no_qemu_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(vm.VmError, match=r"qemu-system-x86_64 not found .*qemu-system-x86"):
        vm.run(["true"])


def test_no_command_and_bad_shared_directories_are_refused(tmp_path, capsys):
    assert vm.main([]) == 1
    assert "give the command to run in the VM after --" in capsys.readouterr().err
    odd = tmp_path / "a,b"
    odd.mkdir()
    with pytest.raises(vm.VmError, match=r"--rw .*a,b: a directory shared with the VM cannot contain"):
        vm._check_shared_dir(odd)
    with pytest.raises(vm.VmError, match="not a directory"):
        vm._check_shared_dir(tmp_path / "missing")


def test_kvm_that_failed_before_is_skipped_with_the_reason(tmp_path):
    qemu = tmp_path / "qemu"
    qemu.write_text("")
    kernel = vm.Kernel("6.1.0-test", tmp_path / "vmlinuz")
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        assert vm.kvm_plan(qemu, kernel, tmp_path)[0] == ["tcg"]
        return
    assert vm.kvm_plan(qemu, kernel, tmp_path) == (["kvm", "tcg"], None)
    vm._remember_kvm_failure(qemu, kernel, "failed to set MSR", tmp_path)
    accels, why = vm.kvm_plan(qemu, kernel, tmp_path)
    assert accels == ["tcg"] and "failed to set MSR" in why
    qemu.write_text("another build")  # a different QEMU is tried again
    assert vm.kvm_plan(qemu, kernel, tmp_path)[0] == ["kvm", "tcg"]


def children(pid: int) -> set[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return set()
    return {int(child) for child in text.split()}


def start_sleeping_vm(cwd: Path) -> tuple[subprocess.Popen[bytes], procs.ProcessId, list[Path]]:
    """`meshemu vm -- sleep 600` once its QEMU runs: the process, QEMU, and
    the temporary files and directories QEMU's command line names (besides
    `cwd`, shared on purpose, and the kernel cache)."""
    process = subprocess.Popen([sys.executable, "-m", "meshemu.vm", "--", "sleep", "600"], cwd=cwd,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=ctrl_c_reaches)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in children(process.pid):
            try:
                argv = Path(f"/proc/{child}/cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue
            if vm.QEMU_PROGRAM in argv[0]:
                qemu = procs.identify(child)
                assert qemu is not None
                temporary = {Path(found) for arg in argv for found in re.findall(r"(?:^|path=)(/tmp/[^,]+)", arg)
                             if not Path(found).is_relative_to(vm.CACHE_DIR.resolve())}  # a clone under /tmp
                temporary.discard(cwd.resolve())
                return process, qemu, sorted(temporary)
        time.sleep(0.1)
    process.kill()
    process.wait()
    raise AssertionError("QEMU did not start")


def assert_vm_gone(qemu: procs.ProcessId, temporary: list[Path]) -> None:
    assert procs.wait_gone([qemu], 10) == [], "QEMU outlived meshemu vm"
    assert any(path.name.startswith("meshemu-vm-") for path in temporary), temporary
    assert any(path.name.startswith("virtme_ret") for path in temporary), temporary
    deadline = time.monotonic() + 10
    while [path for path in temporary if path.exists()] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [path for path in temporary if path.exists()] == []


@needs_vm
def test_sigterm_and_ctrl_c_stop_the_vm(tmp_path):
    for signum, status in ((signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)):
        process, qemu, temporary = start_sleeping_vm(tmp_path)
        try:
            time.sleep(1.0)
            process.send_signal(signum)
            assert process.wait(timeout=20) == status
            assert_vm_gone(qemu, temporary)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert "the VM is stopped" in process.stderr.read().decode()


@needs_vm
def test_sigkill_of_meshemu_vm_leaves_no_qemu_and_no_temporary_files(tmp_path):
    process, qemu, temporary = start_sleeping_vm(tmp_path)
    try:
        time.sleep(1.0)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=20) == -signal.SIGKILL
        assert_vm_gone(qemu, temporary)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()
        procs.stop([qemu], 1.0)


@needs_vm
@pytest.mark.slow
def test_hwsim_tests_pass_inside_the_vm():
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "meshemu.vm", "--", sys.executable, "-m", "pytest", "-q",
                             "-p", "no:cacheprovider", "tests/test_hwsim.py"], cwd=REPO, capture_output=True,
                            text=True, timeout=1200)
    elapsed = time.monotonic() - started
    print(result.stdout[-3000:], result.stderr[-3000:], f"{elapsed:.0f} s in all", sep="\n")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = re.search(r"(\d+) passed", result.stdout)
    assert summary and int(summary.group(1)) >= 2 and " failed" not in result.stdout
    assert re.search(r"booting Debian's kernel \S+ under (KVM|TCG)", result.stderr)
