"""The medium's lateness while bad clients work its control socket.

    python -m meshemu.bench.control

A 3-node chain carries a ping every 5 ms; the medium's lateness (count,
p50, p99, p99.9, max: cumulative since the lab came up) is printed after a
quiet stretch, after a client sent 100 000 `stats` requests without reading
a reply (the medium disconnects it past 16 MiB of unread replies), after
276 connections at once (256 are served) and after a quiet stretch again.
"""

from __future__ import annotations

import socket
import tempfile
import time
from pathlib import Path

from ..lab import Lab

LAB = "name: ctlbench\nseed: 1\ngenerate: {kind: chain, n: 3, spacing: 200m}\n"
CONNECTIONS = 276


def connect(path: Path) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(30)
    client.connect(str(path))
    return client


def flood(path: Path) -> float:
    """Seconds until the medium cut off a client that never reads."""
    greedy = connect(path)
    start = time.monotonic()
    try:
        for _ in range(100):
            greedy.sendall(b'{"op": "stats", "peers": true}\n' * 1000)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        greedy.close()
    return time.monotonic() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        topology = Path(directory) / "ctlbench.yaml"
        topology.write_text(LAB)
        with Lab.from_file(topology) as lab:
            socket_path = lab.run_dir / "control.sock"
            pinger = lab["n0"].spawn(["ping", "-q", "-i", "0.005", "-c", "4000", "n2"])

            def lateness(stage: str) -> None:
                late = lab.control("lateness")
                figures = "  ".join(f"{key.removesuffix('_ns')} {late[key] / 1e3:.0f} us" for key in ("p50_ns", "p99_ns", "p999_ns", "max_ns"))
                print(f"{stage:<28} count {late['count']:>6}  {figures}")

            try:
                time.sleep(3)
                lateness("quiet, 3 s")
                print(f"{'':<28} (the flooding client was cut off after {flood(socket_path):.2f} s)")
                lateness("after the stats flood")
                clients = [connect(socket_path) for _ in range(CONNECTIONS)]
                time.sleep(0.5)
                for client in clients:
                    client.close()
                lateness(f"after {CONNECTIONS} connections")
                time.sleep(3)
                lateness("quiet again, 3 s")
            finally:
                pinger.kill()
                pinger.wait()


if __name__ == "__main__":
    main()
