"""Issue 19, item 7: a lab touches nothing of the host outside its
namespaces. The host's interfaces, addresses, routes, policy rules,
iptables and ip6tables rules and the network sysctls a node sets inside
itself are the same before a lab with aodvd and bpd comes up, while it runs
and after it is down; its run directory and control socket are root's
alone."""

from __future__ import annotations

import stat

import pytest

from meshemu import Lab
from meshemu.leftovers import differences, host

pytestmark = pytest.mark.root

LAB = """\
name: isol
seed: 1
routing: aodv
queueing: {mode: backpressure, classify: destination, threshold: 2}
generate: {kind: chain, n: 4, spacing: 200m}
"""


def test_a_lab_changes_nothing_of_the_host_and_keeps_its_files_to_root(write):
    before = host()
    with Lab.from_file(write("isol.yaml", LAB)) as lab:
        ping = lab["n0"].run(["ping", "-c", "2", "-W", "10", "n3"], timeout=30)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        assert differences(before, host()) == {}, "the running lab changed the host"
        run_dir = lab.run_dir.stat()
        assert (run_dir.st_uid, stat.S_IMODE(run_dir.st_mode)) == (0, 0o700)
        socket = (lab.run_dir / "control.sock").stat()
        assert stat.S_ISSOCK(socket.st_mode) and (socket.st_uid, stat.S_IMODE(socket.st_mode)) == (0, 0o600)
    assert differences(before, host()) == {}, "the lab left the host changed"
