"""Issue 19, item 7: a lab touches nothing of the host outside its
namespaces. The host's interfaces, addresses, routes, policy rules,
iptables and ip6tables rules and the network sysctls a node sets inside
itself are the same before a lab with aodvd and bpd comes up, while it runs
and after it is down; its run directory and control socket are root's
alone."""

from __future__ import annotations

import re
import stat
import subprocess
from pathlib import Path

import pytest

from meshemu import Lab

pytestmark = pytest.mark.root

LAB = """\
name: isol
seed: 1
routing: aodv
queueing: {mode: backpressure, classify: destination, threshold: 2}
generate: {kind: chain, n: 4, spacing: 200m}
"""

# What a node sets in its own namespace (medium/src/netns.rs), looked at on the host.
SYSCTL_DIRS = ["/proc/sys/net/ipv4/conf/all", "/proc/sys/net/ipv4/conf/default", "/proc/sys/net/ipv6/conf/all",
               "/proc/sys/net/ipv6/conf/default"]
SYSCTL_FILES = ["/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv4/ip_default_ttl"]
# Chain policies carry packet and byte counters, which the host's own traffic moves.
COUNTERS = re.compile(r"\[\d+:\d+\]")


def output(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout


def rules(program: str) -> list[str]:
    """iptables-save without its dated comments and counters."""
    return [COUNTERS.sub("", line) for line in output(program).splitlines() if not line.startswith("#")]


def sysctls() -> dict[str, str]:
    files = list(SYSCTL_FILES)
    for directory in SYSCTL_DIRS:
        files += [str(path) for path in sorted(Path(directory).iterdir())]
    values = {}
    for file in files:
        try:
            values[file] = Path(file).read_text()
        except OSError:
            continue  # write-only or refused (stable_secret)
    return values


def host() -> dict[str, object]:
    return {
        "links": output("ip", "-o", "link", "show"),
        "addresses": output("ip", "-o", "address", "show"),
        "routes": output("ip", "route", "show", "table", "all"),
        "routes6": output("ip", "-6", "route", "show", "table", "all"),
        "rules": output("ip", "rule", "show"),
        "rules6": output("ip", "-6", "rule", "show"),
        "iptables": rules("iptables-save"),
        "ip6tables": rules("ip6tables-save"),
        "sysctls": sysctls(),
    }


def differences(before: dict[str, object], now: dict[str, object]) -> list[str]:
    return [key for key in before if before[key] != now[key]]


def test_a_lab_changes_nothing_of_the_host_and_keeps_its_files_to_root(write):
    before = host()
    with Lab.from_file(write("isol.yaml", LAB)) as lab:
        ping = lab["n0"].run(["ping", "-c", "2", "-W", "10", "n3"], timeout=30)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert differences(before, host()) == [], "the running lab changed the host"
        run_dir = lab.run_dir.stat()
        assert (run_dir.st_uid, stat.S_IMODE(run_dir.st_mode)) == (0, 0o700)
        socket = (lab.run_dir / "control.sock").stat()
        assert stat.S_ISSOCK(socket.st_mode) and (socket.st_uid, stat.S_IMODE(socket.st_mode)) == (0, 0o600)
    assert differences(before, host()) == [], "the lab left the host changed"
