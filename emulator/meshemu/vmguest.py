"""Inside the VM of `meshemu vm`: runs the requested command and writes its
exit status into the exchange directory shared with the host.

Run as `python3 -I vmguest.py EXCHANGE/request.json` by virtme-ng's init. It
is a standalone script on purpose: under software emulation every module
imported over the 9p root costs time, so it imports only the standard
library. The request is JSON written by vm.py: `argv`, `cwd`, `env` and
`modules` (the cached kernel's module directory on the host).
"""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

STARTED = "started"
STATUS = "status"


def virtio_port(name: str) -> Path | None:
    """The /dev node of the virtio serial port called `name` (the guest has
    no udev to make /dev/virtio-ports/NAME)."""
    for entry in Path("/sys/class/virtio-ports").glob("*/name"):
        try:
            if entry.read_text().strip() == name:
                node = Path("/dev") / entry.parent.name
                return node if node.exists() else None
        except OSError:
            continue
    return None


def link_modules(modules: str) -> None:
    """modprobe looks in /lib/modules/<release>; the host may not even have
    /lib/modules (virtme-ng's own link then fails), /lib is an overlay here."""
    target = Path("/lib/modules") / platform.release()
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(modules)


def load_tun() -> None:
    """The TAP backend needs /dev/net/tun; Debian builds tun as a module and
    nothing loads it on demand here (no udev)."""
    if not Path("/dev/net/tun").exists():
        subprocess.run(["modprobe", "tun"], stdin=subprocess.DEVNULL, capture_output=True, check=False)


def load_congestion_controls(modules: str) -> str | None:
    """Loads every TCP congestion control the kernel ships as a module (one
    modprobe): programs find them by name, and experiments plan with what
    tcp_available_congestion_control lists, which is only what is loaded.
    Returns modprobe's complaint, if any."""
    names = sorted(path.name.split(".", 1)[0] for path in Path(modules, "kernel", "net", "ipv4").glob("tcp_*.ko*")
                   if not path.name.startswith("tcp_diag."))  # socket diagnostics, not a congestion control
    if not names:
        return None
    result = subprocess.run(["modprobe", "-a", *names], stdin=subprocess.DEVNULL, capture_output=True, check=False)
    if result.returncode == 0:
        return None
    return result.stderr.decode(errors="replace").strip() or f"modprobe exited with {result.returncode}"


def main(request_path: Path) -> int:
    exchange = request_path.parent
    request = json.loads(request_path.read_text())
    (exchange / STARTED).write_text(f"{platform.release()}\n")
    streams = []
    for name, fallback in (("virtme.stdout", sys.stdout), ("virtme.stderr", sys.stderr)):
        port = virtio_port(name)
        streams.append(open(port, "wb", buffering=0) if port is not None else fallback.buffer)
    try:
        link_modules(request["modules"])
        load_tun()
        complaint = load_congestion_controls(request["modules"])
        if complaint:
            streams[1].write(f"meshemu vm: loading TCP congestion controls: {complaint}\n".encode())
        completed = subprocess.run(request["argv"], cwd=request["cwd"], env=request["env"],
                                   stdin=subprocess.DEVNULL, stdout=streams[0], stderr=streams[1], check=False)
        # Killed by a signal: the shell's convention.
        status = completed.returncode if completed.returncode >= 0 else 128 - completed.returncode
    except OSError as exc:
        streams[1].write(f"meshemu vm: {request['argv'][0]}: {exc.strerror or exc}\n".encode())
        status = 127
    with open(exchange / STATUS, "w") as file:
        file.write(f"{status}\n")
        file.flush()
        os.fsync(file.fileno())
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: vmguest.py EXCHANGE/request.json (started by meshemu vm)")
    sys.exit(main(Path(sys.argv[1])))
