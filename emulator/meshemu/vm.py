"""The VM mode: run a command under Debian's stock kernel in QEMU.

    meshemu vm [--memory 2G] [--cpus 2] [--rw DIR]... -- COMMAND [ARG...]

For kernels without mac80211_hwsim (or without TCP vegas, westwood, ...):
the guest sees the host's filesystem read-only, with writable tmpfs overlays
(/etc, /tmp, /var, ...) and the working directory (plus every `--rw DIR`)
shared writable, so our binaries, iperf3 and the user's programs are there
and results land on the host. Every module Debian ships can be loaded.

How: setup.sh unpacks `linux-image-amd64` into `.cache/vm/kernel/<version>`.
virtme-ng (`virtme-run --dry-run --show-command`) writes the initramfs and
the QEMU command line; we run QEMU ourselves as a child that dies with us
(PR_SET_PDEATHSIG), so the VM never outlives this process, and stop it by
PID on Ctrl-C or SIGTERM. The command is handed over in a JSON file in a
shared exchange directory, never through a shell; inside, `python -I
vmguest.py FILE` (standalone: no imports from the venv) runs it with its
output on virtio ports relayed here, and writes its exit status back.
Every temporary file (the initramfs, the request, virtme-ng's return-code
file) lives in that directory, and a small reaper process removes it once
both this process and QEMU are gone, also after SIGKILL.

KVM is tried first when /dev/kvm opens; if QEMU cannot boot the kernel with
it, the failure is remembered in `.cache/vm/kvm-unusable.json` and the
command runs under TCG (software emulation). Which one runs is said on
stderr.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import os
import platform
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Sequence

from .errors import MeshemuError

REPO = Path(__file__).resolve().parents[2]
CACHE_DIR = Path(os.environ.get("MESHEMU_VM_CACHE", REPO / ".cache" / "vm"))
QEMU_PROGRAM = "qemu-system-x86_64"
VIRTME_PROGRAM = "virtme-run"
DEFAULT_MEMORY = "2G"
# A guest that has not started its command by then is stuck.
BOOT_TIMEOUT_S = {"kvm": 60.0, "tcg": 300.0}
STOP_GRACE_S = 5.0
# Files of the exchange directory.
REQUEST = "request.json"
STARTED = "started"
STATUS = "status"
INITRAMFS = "initramfs.img"
GUEST_HELPER = Path(__file__).resolve().parent / "vmguest.py"
# Writable in the guest (tmpfs over the host's read-only view): labs write
# /etc/netns and /run, modules are linked under /lib/modules, tests use /tmp.
GUEST_OVERLAYS = ["/etc", "/lib", "/home", "/root", "/opt", "/srv", "/usr", "/var", "/tmp"]


class VmError(MeshemuError):
    pass


@dataclass(frozen=True)
class Kernel:
    version: str
    image: Path


def find_kernel(cache: Path = CACHE_DIR) -> Kernel:
    """The cached Debian kernel (setup.sh puts it there)."""
    current = cache / "kernel" / "current"
    if not current.is_dir():
        raise VmError(f"no kernel package in {cache / 'kernel'}: run ./setup.sh, which fetches Debian's "
                      f"linux-image-amd64 there with apt-get (or set MESHEMU_VM_CACHE)")
    version = current.resolve().name
    image = current / "boot" / f"vmlinuz-{version}"
    if not image.is_file() or not (current / "lib" / "modules" / version / "modules.dep").is_file():
        raise VmError(f"the kernel cache {current.resolve()} is incomplete (no {image.name} or modules.dep): "
                      f"delete it and run ./setup.sh again")
    return Kernel(version, image.resolve())


def find_program(name: str, package: str) -> Path:
    beside_python = Path(sys.executable).parent / name
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return beside_python
    found = shutil.which(name)
    if found is None:
        raise VmError(f"{name} not found (looked in {beside_python.parent} and on PATH): the VM mode needs "
                      f"{package}; ./setup.sh installs it")
    return Path(found)


# --- KVM or TCG ---------------------------------------------------------------------

def _kvm_key(qemu: Path, kernel: Kernel) -> str:
    """What decides whether KVM can boot the kernel here."""
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        flags = ""
    stat = qemu.stat()
    parts = [platform.release(), kernel.version, str(qemu), str(stat.st_size), str(stat.st_mtime_ns),
             hashlib.sha256(flags.encode()).hexdigest()[:16]]
    return "|".join(parts)


def _kvm_verdict_file(cache: Path) -> Path:
    return cache / "kvm-unusable.json"


def kvm_plan(qemu: Path, kernel: Kernel, cache: Path = CACHE_DIR) -> tuple[list[str], str | None]:
    """The accelerators to try in order, and why KVM is left out (if it is)."""
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
        os.close(fd)
    except OSError as exc:
        return ["tcg"], f"/dev/kvm: {exc.strerror}"
    try:
        verdict = json.loads(_kvm_verdict_file(cache).read_text())
    except (OSError, ValueError):
        verdict = None
    if isinstance(verdict, dict) and verdict.get("key") == _kvm_key(qemu, kernel):
        return ["tcg"], (f"KVM could not boot this kernel here before ({verdict.get('reason')}); "
                         f"delete {_kvm_verdict_file(cache)} to try again")
    return ["kvm", "tcg"], None


def _remember_kvm_failure(qemu: Path, kernel: Kernel, reason: str, cache: Path) -> None:
    try:
        cache.mkdir(parents=True, exist_ok=True)
        _kvm_verdict_file(cache).write_text(json.dumps({"key": _kvm_key(qemu, kernel), "reason": reason}) + "\n")
    except OSError:
        pass  # only a shortcut for next time


# --- the host side ------------------------------------------------------------------

def _check_shared_dir(path: Path) -> Path:
    path = path.resolve()
    if not path.is_dir():
        raise VmError(f"--rw {path}: not a directory")
    # virtme-ng and QEMU options separate fields with these.
    if any(c in str(path) for c in ",=\n"):
        raise VmError(f"--rw {path}: a directory shared with the VM cannot contain ',' or '='")
    return path


def qemu_command(kernel: Kernel, accel: str, exchange: Path, shared: Sequence[Path], memory: str, cpus: int,
                 python: str = sys.executable) -> list[str]:
    """The QEMU argument list, as virtme-ng builds it (it also writes the
    initramfs into the exchange directory)."""
    virtme = find_program(VIRTME_PROGRAM, "virtme-ng (pip)")
    find_program(QEMU_PROGRAM, "the Debian package qemu-system-x86")
    # Isolated mode: the guest helper imports nothing from the venv (imports
    # over 9p under TCG cost seconds each).
    guest = f"exec {shlex.quote(python)} -I {shlex.quote(str(GUEST_HELPER))} {shlex.quote(str(exchange / REQUEST))}"
    argv = [str(virtme), "--kimg", str(kernel.image), "--mods", "auto", "--memory", memory, "--cpus", str(cpus),
            "--force-9p", "--save-initramfs", str(exchange / INITRAMFS), "--dry-run", "--show-command",
            "--script-sh", guest]
    for directory in GUEST_OVERLAYS:
        argv.append(f"--overlay-rwdir={directory}")
    for directory in [exchange, *shared]:
        argv.append(f"--rwdir={directory}")
    if accel == "tcg":
        argv.append("--disable-kvm")
    # virtme-ng's return-code file (mkstemp), which QEMU writes: into the
    # exchange directory, so it goes with it.
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False,
                            env={**os.environ, "TMPDIR": str(exchange)})
    lines = [line for line in result.stdout.splitlines() if QEMU_PROGRAM in line.split(" ", 1)[0]]
    if result.returncode != 0 or not lines:
        detail = (result.stderr.strip() or result.stdout.strip() or "no output").splitlines()[-1]
        raise VmError(f"virtme-run could not prepare the VM (exit {result.returncode}): {detail}")
    command = shlex.split(lines[-1])
    if accel == "kvm":
        # No silent fallback inside QEMU: we want to know which one runs.
        command = ["accel=kvm" if arg == "accel=kvm:tcg" else arg for arg in command]
    return command


def _die_with(parent: int):
    """For the QEMU child before exec: SIGKILL when `parent` (this process)
    dies, also if it died before the child could ask for it."""

    def arm() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return arm


# Waits until every holder of its stdin's write end (this process and QEMU)
# is gone, then removes the exchange directory.
_REAPER = "import shutil, sys; sys.stdin.buffer.read(); shutil.rmtree(sys.argv[1], ignore_errors=True)"


def _start_reaper(exchange: Path) -> subprocess.Popen[bytes]:
    """The remover of the exchange directory. A session of its own: Ctrl-C
    in the terminal does not reach it."""
    return subprocess.Popen([sys.executable, "-I", "-c", _REAPER, str(exchange)], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


class _Relay(threading.Thread):
    """Copies a pipe to one of our streams; keeps the tail for messages."""

    def __init__(self, source: BinaryIO, sink: BinaryIO):
        super().__init__(daemon=True)
        self.source = source
        self.sink = sink
        self.tail = b""

    def run(self) -> None:
        while chunk := self.source.read1(65536):  # type: ignore[attr-defined]
            self.tail = (self.tail + chunk)[-4096:]
            try:
                self.sink.write(chunk)
                self.sink.flush()
            except (OSError, ValueError):
                pass

    def last_line(self) -> str:
        lines = [line for line in self.tail.decode(errors="replace").splitlines() if line.strip()]
        return lines[-1].strip() if lines else "no error output"


class _Stop(Exception):
    def __init__(self, signum: int):
        self.signum = signum


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signum)


def _boot(command: list[str], exchange: Path, accel: str,
          reaper: subprocess.Popen[bytes]) -> tuple[int | None, str, bool]:
    """Runs QEMU until it exits. Returns (exit status of the guest command or
    None, QEMU's last error line, whether the guest started)."""
    assert reaper.stdin is not None
    # QEMU holds the reaper's pipe too: the directory it shares stays while it runs.
    qemu = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=_die_with(os.getpid()),
                            pass_fds=(reaper.stdin.fileno(),))
    assert qemu.stdout is not None and qemu.stderr is not None
    relays = [_Relay(qemu.stdout, sys.stdout.buffer), _Relay(qemu.stderr, sys.stderr.buffer)]
    for relay in relays:
        relay.start()
    try:
        deadline = time.monotonic() + BOOT_TIMEOUT_S[accel]
        while qemu.poll() is None:
            if not (exchange / STARTED).exists() and time.monotonic() > deadline:
                _stop(qemu)
                return None, f"the guest did not start within {BOOT_TIMEOUT_S[accel]:.0f} s", False
            time.sleep(0.05)
    finally:
        if qemu.poll() is None:
            _stop(qemu)
        for relay in relays:
            relay.join(timeout=5)
    started = (exchange / STARTED).exists()
    try:
        status: int | None = int((exchange / STATUS).read_text().strip())
    except (OSError, ValueError):
        status = None
    reason = relays[1].last_line() if qemu.returncode != 0 else f"QEMU exited with status {qemu.returncode}"
    return status, reason, started


def _stop(qemu: subprocess.Popen[bytes]) -> None:
    """QEMU by PID: SIGTERM, then SIGKILL."""
    qemu.terminate()
    try:
        qemu.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        qemu.kill()
        qemu.wait()


def run(argv: Sequence[str], *, shared: Sequence[Path] = (), memory: str = DEFAULT_MEMORY, cpus: int | None = None,
        cache: Path = CACHE_DIR, cwd: Path | None = None, say=None) -> int:
    """Runs `argv` inside the VM; returns its exit status."""
    if isinstance(argv, (str, bytes)) or not argv or not all(isinstance(arg, str) for arg in argv):
        raise VmError("give the command to run in the VM after --, e.g. meshemu vm -- meshemu run exp.yaml")
    say = say or (lambda message: print(f"meshemu vm: {message}", file=sys.stderr, flush=True))
    kernel = find_kernel(cache)
    qemu = find_program(QEMU_PROGRAM, "the Debian package qemu-system-x86")
    find_program(VIRTME_PROGRAM, "virtme-ng (pip)")
    cwd = (cwd or Path.cwd()).resolve()
    shared_dirs = list(dict.fromkeys(_check_shared_dir(Path(d)) for d in [cwd, *shared]))
    accels, kvm_skipped = kvm_plan(qemu, kernel, cache)
    cpus = cpus or min(os.cpu_count() or 1, 2)
    exchange = Path(tempfile.mkdtemp(prefix="meshemu-vm-", dir="/tmp"))
    reaper = _start_reaper(exchange)
    previous = {signum: signal.signal(signum, _raise_stop) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        request = {"argv": list(argv), "cwd": str(cwd), "env": dict(os.environ),
                   "modules": str(kernel.image.parent.parent / "lib" / "modules" / kernel.version)}
        (exchange / REQUEST).write_text(json.dumps(request))
        for accel in accels:
            command = qemu_command(kernel, accel, exchange, shared_dirs, memory, cpus)
            if accel == "kvm":
                say(f"booting Debian's kernel {kernel.version} under KVM")
            else:
                why = f" ({kvm_skipped})" if kvm_skipped else ""
                say(f"booting Debian's kernel {kernel.version} under TCG, software emulation{why}")
            started_at = time.monotonic()
            status, reason, started = _boot(command, exchange, accel, reaper)
            if status is not None:
                say(f"{shlex.join(argv)} exited with status {status} after {time.monotonic() - started_at:.1f} s "
                    f"in the VM")
                return status
            if accel == "kvm" and not started:
                kvm_skipped = f"KVM cannot boot it here: {reason}"
                _remember_kvm_failure(qemu, kernel, reason, cache)
                (exchange / INITRAMFS).unlink(missing_ok=True)
                continue
            if not started:
                raise VmError(f"the VM did not start the command: {reason}")
            raise VmError(f"the VM stopped before {argv[0]} finished (kernel panic or out of memory?): {reason}")
        raise VmError("no accelerator could boot the kernel")  # tcg is always the last one
    except KeyboardInterrupt:
        say("interrupted: the VM is stopped")
        return 130
    except _Stop as stop:
        say(f"{signal.Signals(stop.signum).name}: the VM is stopped")
        return 128 + stop.signum
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        reaper.communicate()  # closes our end: the reaper removes the exchange directory


# --- command line -------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory", default=DEFAULT_MEMORY, help=f"guest memory (default {DEFAULT_MEMORY})")
    parser.add_argument("--cpus", type=int, default=None, help="guest CPUs (default: up to 2)")
    parser.add_argument("--rw", action="append", default=[], metavar="DIR",
                        help="another host directory the VM may write to (the working directory always is)")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = argv[argv.index("--") + 1:] if "--" in argv else []
    options = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="meshemu vm", description="Run a command in a VM with Debian's stock "
                                     "kernel (mac80211_hwsim, every TCP congestion control module).")
    add_arguments(parser)
    args = parser.parse_args(options)
    try:
        return run(command, shared=[Path(d) for d in args.rw], memory=args.memory, cpus=args.cpus)
    except MeshemuError as exc:
        print(f"meshemu vm: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
