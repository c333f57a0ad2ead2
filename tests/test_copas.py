"""copasd in a lab: on a ring of two 4-hop paths between s and d, COPAS
puts TCP data on one and the ACKs on the other, as the kernel's routing
state in every node shows and the relays' radio counters confirm, and
Reno's goodput is not worse than with AODV, which carries both over one.

Figures (goodput with each, bytes the relays sent) are printed; run with -s."""

from __future__ import annotations

import json
import time

import pytest

from meshemu import Lab
from meshemu.choices import Copas
from meshemu.routing import control_traffic

from conftest import namespaces

pytestmark = pytest.mark.root

# s and d 660 m apart, out of each other's carrier-sense range (550 m); the
# upper relays a1-a3 and the lower b1-b3 at most 215-236 m from their
# neighbours on the path (range 250 m) and 380 m or more from any other
# node, so the only routes are the two disjoint 4-hop paths. a2 and b2 are
# 580 m apart: the middles of the two paths do not even sense each other.
RING = """\
name: {name}
profile: ns2-wavelan
seed: 1
routing: {routing}
nodes:
  s: {{position: [0m, 0m]}}
  a1: {{position: [140m, 190m]}}
  a2: {{position: [330m, 290m]}}
  a3: {{position: [520m, 190m]}}
  d: {{position: [660m, 0m]}}
  b1: {{position: [140m, -190m]}}
  b2: {{position: [330m, -290m]}}
  b3: {{position: [520m, -190m]}}
"""
TRANSFER_S = 20


def reno_goodput_bps(lab: Lab) -> float:
    """A Reno bulk transfer s -> d after a ping has found the routes; goodput seen by the receiver."""
    ping = lab["s"].run(["ping", "-c", "2", "-W", "10", "d"], timeout=30)
    assert ping.returncode == 0, ping.stdout + ping.stderr
    server = lab["d"].spawn(["iperf3", "-s", "-1"])
    time.sleep(0.5)
    client = lab["s"].run(["iperf3", "-c", "d", "-C", "reno", "-t", str(TRANSFER_S), "-J"], timeout=TRANSFER_S + 30)
    server.wait(timeout=10)
    assert client.returncode == 0, client.stdout[-2000:] + client.stderr
    return json.loads(client.stdout)["end"]["sum_received"]["bits_per_second"]


def policy_routes(lab: Lab, node: str) -> dict[tuple[str, str], str]:
    """The node's per-(source, destination) routes: (src, dst) -> next hop
    (dst itself when direct), from `ip rule` and the tables the rules name."""
    routes = {}
    for rule in json.loads(lab[node].run(["ip", "-j", "rule"], check=True).stdout):
        if rule.get("priority") != 1730:
            continue
        table = rule["table"]
        for route in json.loads(lab[node].run(["ip", "-j", "route", "show", "table", str(table)], check=True).stdout):
            routes[(rule["src"], route["dst"])] = route.get("gateway", route["dst"])
    return routes


def host_route(lab: Lab, node: str, dst: str) -> str | None:
    """The next hop of the node's own host route to dst (the daemon's, proto 173)."""
    for route in json.loads(lab[node].run(["ip", "-j", "route", "show", "proto", "173"], check=True).stdout):
        if route["dst"] == dst:
            return route.get("gateway", dst)
    return None


def walk(lab: Lab, ip: dict[str, str], src: str, dst: str) -> list[str]:
    """The nodes packets from src to dst cross: src's host route, then each relay's policy route."""
    name = {address: node for node, address in ip.items()}
    first_hop = host_route(lab, src, ip[dst])
    assert first_hop is not None, f"{src} has no route to {dst}"
    path = [src, name[first_hop]]
    while path[-1] != dst and len(path) <= len(ip):
        path.append(name[policy_routes(lab, path[-1])[(ip[src], ip[dst])]])
    return path


def test_data_and_acks_take_disjoint_paths_and_reno_does_not_lose(write):
    with Lab.from_file(write("aodv.yaml", RING.format(name="cpaodv", routing="aodv"))) as lab:
        time.sleep(2.5)  # HELLOs
        aodv_bps = reno_goodput_bps(lab)

    with Lab.from_file(write("copas.yaml", RING.format(name="cpcopas", routing="copas"))) as lab:
        ip = {node.name: node.ip for node in lab}
        before = lab.stats()
        copas_bps = reno_goodput_bps(lab)
        after = lab.stats()

        # The kernel's state: s's host route, then every relay's per-(source, destination) route,
        # takes the data along one side of the ring and d's ACKs back along the other.
        data_path = walk(lab, ip, "s", "d")
        ack_path = walk(lab, ip, "d", "s")
        assert len(data_path) == len(ack_path) == 5, (data_path, ack_path)
        assert not set(data_path[1:-1]) & set(ack_path[1:-1]), (data_path, ack_path)
        # The radio agrees: the data relays carried the segments, the others the ACKs.
        sent = {node: after[node]["tx_bytes"] - before[node]["tx_bytes"] for node in ip if node not in ("s", "d")}
        for data_relay, ack_relay in zip(data_path[1:-1], reversed(ack_path[1:-1])):
            assert sent[data_relay] > copas_bps * TRANSFER_S / 8 * 0.8, sent
            assert sent[ack_relay] < sent[data_relay] / 5, sent

        selected = [json.loads(line) for line in (lab.run_dir / "nodes" / "d" / Copas.events).read_text().splitlines()]
        roles = {e["role"] for e in selected if e["event"] == "path_selected"}
        assert roles == {"forward", "reverse"}, selected
        control = control_traffic(lab)
        assert control is not None and control["control_packets"] > 0
        lateness_ms = lab.control("lateness")["p99_ns"] / 1e6
    assert not any(name.startswith(("cpaodv-", "cpcopas-")) for name in namespaces())
    print(f"\nring, Reno s -> d for {TRANSFER_S} s: AODV {aodv_bps / 1e3:.0f} kbit/s, COPAS {copas_bps / 1e3:.0f} "
          f"kbit/s ({copas_bps / aodv_bps:.2f}); data via {'-'.join(data_path)}, ACKs via {'-'.join(ack_path)}; "
          f"relays sent {sent} B; COPAS control {control['control_bytes']} B in {control['control_packets']} packets; "
          f"medium lateness p99 {lateness_ms:.2f} ms")
    # Not worse than AODV. Measured COPAS/AODV 1.07-1.13 in 6 runs on the shared machine
    # (2026-11-25: AODV 268-278 kbit/s, COPAS 298-306), well clear of AODV's +-2% run-to-run spread.
    assert copas_bps >= aodv_bps, (copas_bps, aodv_bps)
