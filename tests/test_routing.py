"""Routing plug-ins: an unmodified third-party daemon (Debian's babeld)
selected with `routing: babeld`, and the plug-in's settings."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from meshemu import Lab
from meshemu.choices import RoutingChoice
from meshemu.routing import control_traffic
from meshemu.topology import load_topology


def test_routing_choices_map_to_lab_json_and_daemon_settings(write):
    text = "name: r\ngenerate: {kind: chain, n: 2, spacing: 200m}\nrouting: %s\n"
    cases = {
        "static": ("static", False, RoutingChoice("static")),
        "aodv": ("none", False, RoutingChoice("aodv")),
        "{aodv: {hello_interval: 500ms, local_repair: true, ttl_start: 1}}":
            ("none", False, RoutingChoice("aodv", {"hello_interval_ms": 500, "local_repair": True, "ttl_start": 1})),
        "{babeld: {hello_interval: 2s}}": ("none", True, RoutingChoice("babeld", {"hello_interval": 2.0})),
        "{aodv: {preset: ns2, local_repair_rule: ns2, rreq_backoff: linear, rerr_broadcast: true, timeout_buffer: 0, "
        "link_feedback_poll: 10ms}}":
            ("none", False, RoutingChoice("aodv", {"preset": "ns2", "local_repair_rule": "ns2", "rreq_backoff": "linear",
                                                   "rerr_broadcast": True, "timeout_buffer": 0,
                                                   "link_feedback_poll_ms": 10})),
    }
    for value, (lab_routing, ipv6, choice) in cases.items():
        topology = load_topology(write("t.yaml", text % value))
        config = topology.lab_config("r", Path("/run/meshemu/r"))
        assert (config["routing"], config["ipv6_link_local"], topology.routing_choice) == (lab_routing, ipv6, choice)


@pytest.mark.root
@pytest.mark.skipif(shutil.which("babeld") is None, reason="babeld is not installed (apt-get install babeld)")
def test_babeld_converges_on_a_chain_and_carries_a_ping(write):
    topology = write("babel.yaml", "name: babelchain\nseed: 4\nrouting: {babeld: {hello_interval: 1s}}\n"
                                   "generate: {kind: chain, n: 4, spacing: 200m}\n")
    with Lab.from_file(topology) as lab:
        assert "fe80::" in lab["n0"].run(["ip", "-6", "addr", "show", "dev", "wlan0"], check=True).stdout
        # Converged when every node on the path has its next hop both ways
        # (n0's route alone came before the way back: the first echo was lost).
        expected = {"n0": "10.0.0.4 via 10.0.0.2", "n1": "10.0.0.4 via 10.0.0.3",
                    "n2": "10.0.0.1 via 10.0.0.2", "n3": "10.0.0.1 via 10.0.0.3"}
        deadline = time.monotonic() + 40
        missing = expected
        while missing and time.monotonic() < deadline:
            missing = {node: route for node, route in expected.items()
                       if route not in lab[node].run(["ip", "route"], check=True).stdout}
            if missing:
                time.sleep(0.5)
        routes = lab["n0"].run(["ip", "route"], check=True).stdout
        assert not missing and "10.0.0.4 via 10.0.0.2" in routes, (missing, routes)
        converged_s = 40 - (deadline - time.monotonic())
        result = lab["n0"].run(["ping", "-c", "3", "-i", "0.3", "-W", "3", "n3"], timeout=20)
        assert result.returncode == 0 and " 0% packet loss" in result.stdout, result.stdout
        assert control_traffic(lab) is None  # babeld does not count its packets for us
        print(f"\nbabeld: n0 has a 3-hop route to n3 {converged_s:.1f} s after the lab was up")
