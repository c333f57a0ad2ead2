"""The medium's control socket under bad clients (issue 19, item 5):
malformed, oversized, slow and abruptly closed requests, clients that never
read, more clients than it serves, and a client that is not root. After
each the medium still answers and the lab still carries traffic."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meshemu import Lab

pytestmark = pytest.mark.root

LAB = "name: ctl\nseed: 1\ngenerate: {kind: chain, n: 3, spacing: 200m}\n"
MAX_CLIENTS = 256  # medium/src/control/server.rs


def connect(path: Path) -> socket.socket:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(str(path))
    return client


def reply(client: socket.socket) -> dict | None:
    """The next reply line, or None when the medium closed the connection."""
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = client.recv(65536)
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        data += chunk
    return json.loads(data.splitlines()[0])


def ask(client: socket.socket, line: bytes) -> dict | None:
    client.sendall(line)
    return reply(client)


def still_serves(lab: Lab) -> None:
    assert lab.status()["nodes"] == 3
    ping = lab["n0"].run(["ping", "-c", "1", "-W", "5", "n2"], timeout=20)
    assert ping.returncode == 0, ping.stdout + ping.stderr


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    path = tmp_path_factory.mktemp("ctl") / "ctl.yaml"
    path.write_text(LAB)
    with Lab.from_file(path) as lab:
        yield lab


def test_malformed_requests_get_errors_and_the_connection_stays_usable(lab):
    client = connect(lab.run_dir / "control.sock")
    cases = [(b"status\n", "not JSON"), (b"\xff\xfe\n", "UTF-8"), (b'{"op": "dance"}\n', "unknown variant"),
             (b'{"op": "move", "node": "n1", "position": "x"}\n', "invalid type"),
             (b'{"op": "flush", "node": "n9", "to": "02:00:00:00:00:01"}\n', "unknown node"),
             (b'[' * 10_000 + b'\n', "not JSON")]
    for line, fragment in cases:
        answer = ask(client, line)
        assert answer is not None and answer["ok"] is False and fragment in answer["error"], (line[:40], answer)
    assert ask(client, b'{"op": "status"}\n')["ok"] is True
    client.close()
    still_serves(lab)


def test_an_oversized_request_closes_only_its_connection(lab):
    other = connect(lab.run_dir / "control.sock")
    big = connect(lab.run_dir / "control.sock")
    try:
        big.sendall(b"x" * (3 << 20))  # no newline: over the 1 MiB line limit
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed while we were still sending
    answer = reply(big)
    assert answer is None or "longer than" in answer["error"], answer
    assert reply(big) is None, "the connection is closed"
    assert ask(other, b'{"op": "status"}\n')["ok"] is True
    still_serves(lab)


def test_slow_and_abruptly_closed_requests(lab):
    slow = connect(lab.run_dir / "control.sock")
    for byte in b'{"op": "positions"}\n':
        slow.sendall(bytes([byte]))
        time.sleep(0.01)
    assert reply(slow)["nodes"]["n1"] == [200.0, 0.0, 0.0]
    for cut in (1, 10, 19):
        half = connect(lab.run_dir / "control.sock")
        half.sendall(b'{"op": "positions"}\n'[:cut])
        half.close()
    still_serves(lab)


def test_a_client_that_never_reads_is_disconnected(lab):
    greedy = connect(lab.run_dir / "control.sock")
    request = b'{"op": "stats", "peers": true}\n' * 1000
    sent = 0
    try:
        while sent < 100:  # 100 000 replies of a kilobyte and more: far past the 16 MiB kept for it
            greedy.sendall(request)
            sent += 1
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        pass
    greedy.settimeout(30)
    received = 0
    while True:
        try:
            chunk = greedy.recv(1 << 20)
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += len(chunk)
    assert received <= 20 << 20, received
    still_serves(lab)


def test_clients_beyond_the_most_served_are_told_so(lab):
    clients = [connect(lab.run_dir / "control.sock") for _ in range(MAX_CLIENTS + 20)]
    try:
        time.sleep(0.5)
        refused = []
        for client in clients[MAX_CLIENTS - 5:]:
            client.settimeout(0.5)
            try:
                refused.append(json.loads(client.recv(4096).splitlines()[0]))
            except (socket.timeout, IndexError):
                pass  # served: nothing unasked for
        assert len(refused) >= 20 and all("the most served at once" in r["error"] for r in refused), refused[:3]
    finally:
        for client in clients:
            client.close()
    time.sleep(0.2)
    still_serves(lab)


def test_only_root_may_connect(lab):
    nobody = subprocess.run(
        [sys.executable, "-c", "import os, socket, sys\nos.setgroups([]); os.setgid(65534); os.setuid(65534)\n"
         "s = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n"
         "    sys.exit(13)\n", str(lab.run_dir / "control.sock")], capture_output=True, text=True, timeout=10)
    assert nobody.returncode == 13, nobody.stderr
    assert os.stat(lab.run_dir).st_mode & 0o077 == 0
