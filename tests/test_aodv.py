"""aodvd in labs: discovery on chain7, ICMP for an unreachable destination,
and the TCP-variants paper's Fig. 1 break-and-repair scenario.

Figures (discovery time, control packets, break/detection/repair times) are
printed; run with -s to see them."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from meshemu import Lab
from meshemu.choices import Aodv
from meshemu.routing import control_traffic, counters, refresh_counters

from conftest import namespaces

pytestmark = pytest.mark.root


def events(lab: Lab, node: str) -> list[dict]:
    path = lab.run_dir / "nodes" / node / Aodv.events
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def model_time_base_ns(lab: Lab) -> int:
    """CLOCK_MONOTONIC at model time 0 (events carry CLOCK_MONOTONIC)."""
    before = time.monotonic_ns()
    status = lab.status()
    after = time.monotonic_ns()
    return (before + after) // 2 - status["time_ns"]


def wait_hellos(lab: Lab, seconds: float = 2.5) -> None:
    """Long enough for every node to hear its neighbours' HELLOs."""
    time.sleep(seconds)


def test_first_ping_across_chain7_succeeds_after_discovery(write):
    topology = write("chain7-aodv.yaml", "name: aodvchain\nrouting: aodv\nseed: 1\n"
                                         "generate: {kind: chain, n: 8, spacing: 200m}\n")
    with Lab.from_file(topology) as lab:
        assert lab.config["routing"] == "none"
        wait_hellos(lab)
        refresh_counters(lab)
        before = counters(lab)
        # -W 15: time for the RREQ retries at the network diameter (a lost flood is retried after 2.8 s, then 5.6 s).
        result = lab["n0"].run(["ping", "-c", "3", "-i", "0.5", "-W", "15", "n7"], timeout=40)
        assert result.returncode == 0, result.stdout + result.stderr
        assert " 0% packet loss" in result.stdout, result.stdout
        first_rtt_ms = float(result.stdout.split("icmp_seq=1 ")[1].split("time=")[1].split()[0])

        succeeded = [e for e in events(lab, "n0") if e["event"] == "discovery_succeeded" and e["dst"] == "10.0.0.8"]
        assert len(succeeded) == 1
        assert succeeded[0]["hops"] == 7
        routes = lab["n3"].run(["ip", "route"], check=True).stdout
        assert "10.0.0.8 via 10.0.0.5" in routes and "10.0.0.1 via 10.0.0.3" in routes, routes

        refresh_counters(lab)
        after = counters(lab)
        sent = {kind: sum(after[n]["control_sent"].get(kind, {}).get("packets", 0)
                          - before[n]["control_sent"].get(kind, {}).get("packets", 0) for n in after)
                for kind in ("rreq", "rrep", "rerr", "hello")}
        assert sent["rrep"] == 7, sent  # only the destination answered: one RREP per hop back
        assert sent["rreq"] >= 7, sent
        control = control_traffic(lab)  # the whole run, read later than `after`
        assert all(control["messages"][kind] >= count for kind, count in sent.items() if count), (control, sent)
        assert control["control_packets"] == sum(control["messages"].values())
        assert control["control_bytes"] > control["control_packets"] * 28
        assert control["overruns"] == {"queue": 0, "neighbours": 0}  # a few pings lose nothing
        print(f"\nchain7 discovery n0->n7: {succeeded[0]['elapsed_ms']} ms, first ping RTT {first_rtt_ms} ms; "
              f"control packets during the ping: {sent}; whole run: {control}")
        held = after["n0"]
        assert held["packets_held"] >= 1 and held["packets_released"] == held["packets_held"]
    assert not any(name.startswith("aodvchain-") for name in namespaces())


def test_held_packets_leave_release_spacing_apart_after_the_reply(write):
    # Ten pings at once from n0 to n2, two hops away: all wait for n0's
    # discovery, and its reply releases them one per 30 ms (ns-2 mode's
    # pacing, at 30 ms rather than its 10: at once they would come back
    # about 9 ms apart here, the four frames of each exchange).
    topology = write("pace.yaml", "name: aodvpace\nseed: 4\n"
                                  "routing: {aodv: {preset: ns2, release_spacing: 30ms}}\n"
                                  "generate: {kind: chain, n: 3, spacing: 200m}\n")
    with Lab.from_file(topology) as lab:
        result = lab["n0"].run(["ping", "-c", "10", "-l", "10", "-W", "5", "n2"], timeout=30)
        assert " 0% packet loss" in result.stdout, result.stdout
        rtts = {int(line.split("icmp_seq=")[1].split()[0]): float(line.split("time=")[1].split()[0])
                for line in result.stdout.splitlines() if "time=" in line}
        steps = sorted(rtts[seq + 1] - rtts[seq] for seq in range(1, 10))
        refresh_counters(lab)
        n0 = counters(lab)["n0"]
        assert n0["packets_held"] == n0["packets_released"] == 10, n0
        assert 25 < steps[4] < 35, result.stdout
        print(f"\nten held pings, RTT steps (ms): {steps}")


def test_unreachable_destination_gets_icmp_when_discovery_fails(write):
    topology = write("pair.yaml", "name: aodvpair\nseed: 2\n"
                                  "routing: {aodv: {expanding_ring_search: false, rreq_retries: 0}}\n"
                                  "generate: {kind: chain, n: 2, spacing: 200m}\n")
    with Lab.from_file(topology) as lab:
        wait_hellos(lab, 1.5)
        result = lab["n0"].run(["ping", "-c", "1", "-W", "8", "10.0.0.200"], timeout=30)
        assert result.returncode != 0
        assert "Destination Host Unreachable" in result.stdout, result.stdout
        failed = [e for e in events(lab, "n0") if e["event"] == "discovery_failed"]
        assert len(failed) == 1 and 2700 <= failed[0]["elapsed_ms"] <= 4000, failed  # one NET_TRAVERSAL_TIME
        refresh_counters(lab)
        assert counters(lab)["n0"]["packets_dropped"] == 1
        # The neighbour is still reached at once.
        assert lab["n0"].run(["ping", "-c", "1", "-W", "5", "n1"], timeout=10).returncode == 0


def test_a_neighbour_that_left_takes_its_kernel_route_with_it(write):
    # n1 walks out of range; once n0 declares the link broken, its direct
    # (scope link) route must leave the kernel too, or the kernel keeps
    # trying to reach n1 on the link and aodvd never hears of the packets.
    topology = write("leaving.yaml", "name: aodvleave\nseed: 2\n"
                                     "routing: {aodv: {expanding_ring_search: false, rreq_retries: 0}}\n"
                                     "generate: {kind: chain, n: 2, spacing: 200m}\n"
                                     "nodes:\n  n1: {mobility: {model: setdest, moves: "
                                     "[{at: 3s, to: [1200m, 0m], speed: 200m/s}]}}\n")
    with Lab.from_file(topology) as lab:
        wait_hellos(lab, 1.5)
        assert "10.0.0.2 dev" in lab["n0"].run(["ip", "route", "show", "proto", "173"], check=True).stdout
        deadline = time.monotonic() + 15
        while not [e for e in events(lab, "n0") if e["event"] == "route_removed" and e["dst"] == "10.0.0.2"]:
            assert time.monotonic() < deadline, events(lab, "n0")
            time.sleep(0.2)
        assert "10.0.0.2 " not in lab["n0"].run(["ip", "route", "show", "proto", "173"], check=True).stdout
        result = lab["n0"].run(["ping", "-c", "1", "-W", "8", "n1"], timeout=30)
        assert "Destination Host Unreachable" in result.stdout, result.stdout
        assert [e for e in events(lab, "n0") if e["event"] == "discovery_failed" and e["dst"] == "10.0.0.2"]


def test_a_next_hop_whose_address_cannot_be_resolved_breaks_the_route(write):
    # ns-2 mode: no HELLOs, only failed data frames break a link. n0's
    # route to n2 goes through n1, which then leaves. With n0's neighbour
    # entry for n1 gone (expired, here flushed), the kernel sends no data
    # frame to n1: it broadcasts ARP requests, then drops the packets
    # (ICMP host unreachable). Only the entry going FAILED tells aodvd.
    topology = write("unresolved.yaml", "name: aodvarp\nseed: 5\nrouting: {aodv: {preset: ns2}}\n"
                                        "generate: {kind: chain, n: 3, spacing: 200m}\n"
                                        "nodes:\n  n1: {mobility: {model: setdest, moves: "
                                        "[{at: 4s, to: [200m, 1000m], speed: 200m/s}]}}\n")
    with Lab.from_file(topology) as lab:
        assert " 0% packet loss" in lab["n0"].run(["ping", "-c", "1", "-W", "3", "n2"], timeout=10).stdout
        assert "10.0.0.3 via 10.0.0.2" in lab["n0"].run(["ip", "route", "show", "proto", "173"], check=True).stdout
        while lab.status()["time_ns"] < 5.5e9:  # n1 is 250 m from n0 and n2 at 4.75 s
            time.sleep(0.1)
        lab["n0"].run(["ip", "neigh", "flush", "all"], check=True)
        result = lab["n0"].run(["ping", "-c", "6", "-i", "1", "-w", "12", "n2"], timeout=30)
        assert "Destination Host Unreachable" in result.stdout, result.stdout
        breaks = [e for e in events(lab, "n0") if e["event"] == "link_broken"]
        assert {(e["neighbor"], e["cause"]) for e in breaks} == {("10.0.0.2", "address resolution")}, breaks
        assert "10.0.0.3 via" not in lab["n0"].run(["ip", "route", "show", "proto", "173"], check=True).stdout


# The paper's Fig. 1, 200 m apart: A=n0 ... E=n4; F joins between D and E
# (at 5 s); E leaves D at 10 m/s from 8 s, out of D's 250 m range at 13 s,
# still in F's. A Reno bulk transfer A -> E runs throughout.
FIG1 = """\
name: aodvfig1
seed: 3
routing: aodv
generate: {kind: chain, n: 5, spacing: 200m}
nodes:
  n4: {mobility: {model: setdest, moves: [{at: 8s, to: [900m, 0m], speed: 10m/s}]}}
  f: {mobility: {model: waypoints, points: [[0s, [725m, 700m]], [5s, [725m, 100m]]]}}
"""
BREAK_S = 13.0  # D (600 m) - E (800 m + 10 m/s x 5 s) = 250 m


def test_fig1_break_is_detected_by_hello_loss_and_repaired_through_f(write):
    with Lab.from_file(write("fig1.yaml", FIG1)) as lab:
        base = model_time_base_ns(lab)
        server = lab["n4"].spawn(["iperf3", "-s", "-1"])
        time.sleep(2.0)
        client_start_s = (time.monotonic_ns() - base) / 1e9
        client = lab["n0"].run(["iperf3", "-c", "n4", "-C", "reno", "-t", "22", "-J"], timeout=60)
        server.wait(timeout=10)
        assert client.returncode == 0, client.stdout[-2000:] + client.stderr

        def at(node: str, kind: str, **match) -> list[float]:
            return [(e["mono_ns"] - base) / 1e9 for e in events(lab, node)
                    if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]

        detected = at("n3", "link_broken", neighbor="10.0.0.5", cause="hello loss")
        assert detected, events(lab, "n3")
        detect_s = detected[0]
        # Two HELLO intervals (+100 ms) after the last HELLO heard, which came before the break.
        assert BREAK_S < detect_s < BREAK_S + 2.5, detect_s
        rerr_sent = at("n3", "rerr_sent")
        rerr_at_a = [t for t in at("n0", "rerr_received") if t >= detect_s]
        assert rerr_sent and rerr_at_a, (rerr_sent, events(lab, "n0"))
        rediscovery = [t for t in at("n0", "discovery_started", dst="10.0.0.5") if t >= rerr_at_a[0]]
        repaired = [t for t in at("n0", "discovery_succeeded", dst="10.0.0.5", hops=5) if t >= rerr_at_a[0]]
        assert rediscovery and repaired, events(lab, "n0")
        via_f = at("n3", "route_added", dst="10.0.0.5", next_hop="10.0.0.6")
        assert via_f and via_f[-1] <= repaired[0] + 0.1
        assert "10.0.0.5 via 10.0.0.6" in lab["n3"].run(["ip", "route"], check=True).stdout

        end_s = (time.monotonic_ns() - base) / 1e9
        assert repaired[0] < end_s - 3.0
        intervals = [(client_start_s + i["sum"]["start"], i["sum"]["bytes"]) for i in json.loads(client.stdout)["intervals"]]
        # TCP resumes once its retransmission timer fires again (exponential backoff, as in the paper).
        after_repair = sum(b for t, b in intervals if t >= repaired[0] + 0.5)
        assert after_repair > 0, (intervals, detect_s, repaired, end_s)
        print(f"\nFig. 1: link D-E out of range at {BREAK_S:.1f} s; D detected the loss at {detect_s:.2f} s "
              f"(+{detect_s - BREAK_S:.2f} s); RERR at A at {rerr_at_a[0]:.2f} s; A rediscovered at "
              f"{rediscovery[0]:.2f} s, new 5-hop route via F at {repaired[0]:.2f} s (disconnection "
              f"{repaired[0] - detect_s:.2f} s after detection); {after_repair} bytes carried after the repair; "
              f"routing control traffic {control_traffic(lab)}")


# Fig. 1 in aodvd's ns-2 mode, with F arriving only after E has left D
# (F in place at 15 s): D's repair (ns-2's rule, the break is next to the
# destination) searches about 1.8 s, its second RREQ finding E through F.
FIG1_LATE_F = FIG1.replace("routing: aodv", "routing: {aodv: {preset: ns2}}").replace(
    "[[0s, [725m, 700m]], [5s, [725m, 100m]]]", "[[0s, [725m, 700m]], [14s, [725m, 700m]], [15s, [725m, 100m]]]")


def test_a_local_repair_holds_what_arrives_for_the_destination_and_releases_it(write):
    # The pings that reach D while it repairs wait in D's queue (held before
    # routing) and go on along the new route, instead of failing one by one
    # on the next hop that left.
    with Lab.from_file(write("fig1-late-f.yaml", FIG1_LATE_F)) as lab:
        wait_hellos(lab)
        ping = lab["n0"].run(["ping", "-c", "340", "-i", "0.05", "-W", "5", "n4"], timeout=60)
        repair = [e for e in events(lab, "n3") if e["event"] == "local_repair_started" and e["dst"] == "10.0.0.5"]
        done = [e for e in events(lab, "n3") if e["event"] == "discovery_succeeded" and e["dst"] == "10.0.0.5"]
        assert repair and done, events(lab, "n3")
        assert "10.0.0.5 via 10.0.0.6" in lab["n3"].run(["ip", "route"], check=True).stdout
        refresh_counters(lab)
        d = counters(lab)["n3"]
        # 20 pings a second over a repair of about 1.8 s.
        assert d["packets_held"] >= 10 and d["packets_released"] == d["packets_held"], d
        assert d["packets_dropped"] == 0, d
        rules = lab["n3"].run(["iptables", "-t", "mangle", "-S", "PREROUTING"], check=True).stdout
        assert "NFQUEUE" not in rules, rules  # the hold ended with the repair
        print(f"\nrepair at D: {done[0]['elapsed_ms']} ms, {d['packets_held']} pings held and released; ping: "
              f"{ping.stdout.strip().splitlines()[-2]}")


def test_quickack_marks_every_route_aodvd_installs_and_keeps_the_catch_all_realm(write):
    """Delayed ACKs off under AODV (experiments ask for it this way): the
    catch-all keeps realm 654, so packets without a route are still held,
    and the host routes found later carry quickack 1."""
    import dataclasses

    from meshemu.topology import load_topology

    topology = load_topology(write("aodv3.yaml", "name: aodvqa\nrouting: aodv\nseed: 1\n"
                                                "generate: {kind: chain, n: 3, spacing: 200m}\n"))
    choice = dataclasses.replace(topology.routing_choice, options={"quickack": True})
    with Lab(dataclasses.replace(topology, routing_choice=choice)) as lab:
        wait_hellos(lab)
        result = lab["n0"].run(["ping", "-c", "2", "-W", "10", "n2"], timeout=30)
        assert result.returncode == 0, result.stdout + result.stderr
        routes = lab["n2"].run(["ip", "route"], check=True).stdout.splitlines()
        catch_all = next(line for line in routes if line.startswith("10.0.0.0/16"))
        assert "realm 654" in catch_all and "quickack 1" in catch_all, routes
        host = next(line for line in routes if line.startswith("10.0.0.1 via 10.0.0.2"))
        assert "quickack 1" in host, routes


def test_an_idle_aodvd_leaves_its_counters_file_alone_until_something_happens(write):
    """With HELLOs off and no traffic nothing changes, so the counters file is
    not rewritten; SIGUSR1 rewrites it, and a discovery changes it (written
    within the counters interval, as one line of JSON)."""
    topology = write("idle-aodv.yaml", "name: aodvidle\nseed: 1\n"
                                       "routing: {aodv: {hello_interval: 0s, link_layer_feedback: true}}\n"
                                       "generate: {kind: chain, n: 3, spacing: 200m}\n")
    with Lab.from_file(topology) as lab:
        path = lab.run_dir / "nodes" / "n0" / "aodv.json"
        first = path.stat()
        time.sleep(2.5)
        assert path.stat().st_ino == first.st_ino, "rewritten although no counter changed"
        refresh_counters(lab)
        asked = path.stat()
        assert asked.st_ino != first.st_ino, "SIGUSR1 did not rewrite it"
        lab["n0"].run(["ping", "-c", "1", "-W", "10", "n2"], timeout=20, check=True)
        deadline = time.monotonic() + 5
        while path.stat().st_ino == asked.st_ino and time.monotonic() < deadline:
            time.sleep(0.05)
        text = path.read_text()
        assert text.count("\n") == 1, "not one line of JSON"
        assert json.loads(text)["discoveries_succeeded"] == 1
