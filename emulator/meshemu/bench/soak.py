"""Long runs (issue 19, item 6; needs root, not for CI: the whole set takes
over an hour). Each part prints its figures; none of them is a pass/fail
timing, but leftovers are counted and reported.

    python -m meshemu.bench.soak mobile [--minutes 60] [--seed 1]
    python -m meshemu.bench.soak routes [--moving 90] [--seed 1]
    python -m meshemu.bench.soak cycles [--count 200] [--topology topologies/random50.yaml]
    python -m meshemu.bench.soak kills  [--count 50] [--seed 1]

mobile: `experiments/tcp-variants/strip.yaml`'s topology (50 nodes, aodvd,
random waypoint 1-20 m/s) with a bulk TCP and a CBR UDP flow between random
pairs, run by `meshemu run` for the given minutes. Every minute: the memory
(RSS) of the medium and of the daemons, and the medium's lateness in that
minute (p50/p99/max, from the differences of its lateness histogram). For
the last 120 s the nodes stand still and the traffic has stopped; after 30 s
of that every node pings a node it has a multi-hop path to: a route still
stuck on a broken link shows as a failed ping.

routes: the same topology without traffic, brought up by a Lab: it moves
for MOVING seconds, stands still, and after 30 s every fifth node pings the
node farthest from it, one ping after another, so that each discovery has
the network to itself: whether routes are found again after motion, apart
from what traffic does to them.

cycles: the lab up and down COUNT times; the time of each, and anything left
on the host after all of them (meshemu.leftovers).

kills: COUNT times `meshemu run` of a 3-node AODV chain with a UDP flow,
killed with SIGKILL at a random moment (seeded) in its first 8 s, then
`meshemu cleanup`; what was left after each cleanup, part by part.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from .. import leftovers
from ..choices import ROUTING_KINDS
from ..errors import MeshemuError
from ..experiment.results import read_records
from ..lab import Lab
from ..queueing import PROGRAM as BPD_PROGRAM
from ..state import lab_names, read_state
from ..topology import load_topology
from .lateness import quantiles

REPO = Path(__file__).resolve().parents[3]
STRIP = REPO / "experiments" / "tcp-variants" / "strip.yaml"
DAEMONS = {kind.daemon for kind in ROUTING_KINDS.values() if kind.daemon is not None} | {BPD_PROGRAM}
STILL_S = 120  # the nodes stand still for the run's last 120 s
SETTLE_S = 30  # then routes have 30 s to repair before the pings
PING_S = 15  # each ping's deadline for its first reply
PING_GAP_S = 0.5  # between the pings' starts

KILLED = """\
description: soak, kills - AODV on a 3-node chain, a UDP flow through it
topology:
  generate: {kind: chain, n: 3, spacing: 200m}
  routing: aodv
duration: 6s
seed: 1
traffic:
  - {kind: udp, name: udp, src: n0, dst: n2, rate: 200kbps, packet: 1000B}
measure: {drain: 0s}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshemu.bench.soak", description=__doc__.splitlines()[0])
    parts = parser.add_subparsers(dest="part", required=True)
    mobile = parts.add_parser("mobile", help="an hour of a mobile 50-node lab: memory, lateness, stuck routes")
    mobile.add_argument("--minutes", type=int, default=60)
    mobile.add_argument("--seed", type=int, default=1)
    routes = parts.add_parser("routes", help="routes found again after motion, without traffic")
    routes.add_argument("--moving", type=int, default=90, help="seconds of motion before standing still")
    routes.add_argument("--seed", type=int, default=1)
    cycles = parts.add_parser("cycles", help="a lab up and down many times")
    cycles.add_argument("--count", type=int, default=200)
    cycles.add_argument("--topology", type=Path, default=REPO / "topologies" / "random50.yaml")
    kills = parts.add_parser("kills", help="SIGKILL of meshemu run at random moments, then meshemu cleanup")
    kills.add_argument("--count", type=int, default=50)
    kills.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    try:
        if args.part == "mobile":
            return soak_mobile(args.minutes, args.seed)
        if args.part == "routes":
            return soak_routes(args.moving, args.seed)
        if args.part == "cycles":
            return soak_cycles(args.count, args.topology)
        return soak_kills(args.count, args.seed)
    except MeshemuError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 1


def meshemu(*args: str, **kwargs: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "meshemu", *args], text=True, cwd=REPO, **kwargs)


def report_leftovers(before: dict[str, object]) -> int:
    left = leftovers.differences(before, leftovers.snapshot())
    if not left:
        print("left on the host: nothing (interfaces, addresses, routes, rules, iptables, sysctls, namespaces, "
              "mounts, processes, files)")
        return 0
    print("left on the host:")
    for part, change in left.items():
        print(f"  {part}: {json.dumps(change)[:2000]}")
    return 1


# --- mobile ---

def strip_topology() -> dict[str, Any]:
    """strip.yaml's topology (50 nodes, aodvd) at its fastest: 1-20 m/s."""
    topology = YAML(typ="safe").load(STRIP.read_text())["topology"]
    topology["mobility"]["speed"] = ["1m/s", "20m/s"]
    return topology


def mobile_experiment(minutes: int, seed: int) -> str:
    stop_s = minutes * 60 - STILL_S  # the traffic stops when the nodes do: the pings test routes, not queues
    return json.dumps({  # JSON is YAML
        "description": f"soak, mobile: strip.yaml's topology for {minutes} min, a bulk TCP and a CBR UDP flow",
        "topology": strip_topology(),
        "duration": f"{minutes * 60}s",
        "warmup": "0s",
        "seed": seed,
        "traffic": [
            {"kind": "tcp", "name": "bulk", "pair": "random", "cc": "cubic", "stop": f"{stop_s}s"},
            {"kind": "udp", "name": "cbr", "pair": "random", "rate": "100kbps", "packet": "512B", "stop": f"{stop_s}s"},
        ],
        "measure": {"drain": "0s"},
    }, indent=2)


def soak_mobile(minutes: int, seed: int) -> int:
    if minutes * 60 <= STILL_S + SETTLE_S:
        raise MeshemuError(f"--minutes {minutes}: the run must be longer than {STILL_S + SETTLE_S} s")
    before = leftovers.snapshot()
    with tempfile.TemporaryDirectory(prefix="meshemu-soak-") as scratch:
        experiment = Path(scratch) / "mobile.yaml"
        experiment.write_text(mobile_experiment(minutes, seed))
        out = Path(scratch) / "results"
        runner = meshemu("run", str(experiment), "--out", str(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            lab = wait_for_lab(runner)
            samples, (pinged, stuck) = watch_mobile(lab, minutes)
            _, stderr = runner.communicate(timeout=600)
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait()
        if runner.returncode != 0:
            raise MeshemuError(f"meshemu run failed: {stderr[-2000:]}")
        [record] = read_records(out / "runs.jsonl")
    print(f"mobile: {minutes} min, seed {seed}, lab {lab.name}, {len(lab)} nodes")
    print(f"{'minute':>6} {'medium MiB':>10} {'daemons MiB':>11} {'largest MiB':>11} "
          f"{'late p50 us':>11} {'p99 us':>8} {'max us':>8}")
    for sample in samples:
        print(f"{sample['minute']:6d} {sample['medium_mib']:10.1f} {sample['daemons_mib']:11.1f} "
              f"{sample['largest_mib']:11.2f} {sample['p50_us']:11.0f} {sample['p99_us']:8.0f} {sample['max_us']:8.0f}")
    for flow in record["metrics"]["flows"]:
        print(f"flow {flow['name']}: goodput {flow.get('goodput_bps', 0) / 1e3:.0f} kbit/s")
    print(f"after {SETTLE_S} s standing still: {len(stuck)} of {pinged} pings over two hops or more got no reply "
          f"{stuck or ''}")
    print(f"run lateness: p99 {record['lateness']['p99_ns'] / 1e3:.0f} us, max {record['lateness']['max_ns'] / 1e3:.0f} us")
    return report_leftovers(before) or (1 if stuck else 0)


def wait_for_lab(runner: subprocess.Popen[str], timeout: float = 120) -> Lab:
    """The runner's lab, once its medium is ready."""
    known = set(lab_names())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and runner.poll() is None:
        for name in set(lab_names()) - known:
            lab = Lab.attach(name)
            if lab.ready is not None:
                return lab
        time.sleep(0.2)
    raise MeshemuError("the runner's lab did not come up")


def watch_mobile(lab: Lab, minutes: int) -> tuple[list[dict[str, Any]], tuple[int, list[str]]]:
    """Samples each minute until the stillness, then the pings."""
    started = time.monotonic()
    samples = []
    last = lab.control("lateness")["buckets"]
    for minute in range(1, minutes + 1):
        if minute * 60 > minutes * 60 - STILL_S:
            break
        time.sleep(max(0.0, started + minute * 60 - time.monotonic()))
        buckets = lab.control("lateness")["buckets"]
        samples.append({"minute": minute, **memory(lab), **quantiles(last, buckets)})
        last = buckets
    time.sleep(max(0.0, started + minutes * 60 - STILL_S - time.monotonic()))
    lab.control("mobility", node=None, run=False)
    time.sleep(SETTLE_S)
    return samples, stuck_routes(lab)


def memory(lab: Lab) -> dict[str, float]:
    state = read_state(lab.run_dir)
    medium = state.medium()
    daemons = [rss_kib(record.pid) for record in state.processes
               if record.role == "node" and record.argv and Path(record.argv[0]).name in DAEMONS]
    daemons = [kib for kib in daemons if kib is not None]
    return {"medium_mib": (rss_kib(medium.pid) or 0) / 1024 if medium else 0.0,
            "daemons_mib": sum(daemons) / 1024, "largest_mib": max(daemons, default=0) / 1024}


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def stuck_routes(lab: Lab) -> tuple[int, list[str]]:
    """Each node pings the node farthest from it in hops among those it
    reaches over links in receive range both ways (at least two hops
    away); how many pinged, and the pairs that got no reply within PING_S.
    The pings start PING_GAP_S apart (50 route discoveries at once would
    test the flood, not the routes) and end well before the run does."""
    names = list(lab.nodes)
    neighbours = neighbours_both_ways(lab)
    pings = {}
    for source in range(len(names)):
        target = farthest(source, neighbours)
        if target is None:
            continue
        # Not lab[...].spawn: that records the ping in the runner's state file, which the runner writes too.
        argv = lab[names[source]].command(["ping", "-c", "1", "-w", str(PING_S), names[target]])
        pings[f"{names[source]}->{names[target]}"] = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                                                       stderr=subprocess.DEVNULL)
        time.sleep(PING_GAP_S)
    return len(pings), [pair for pair, ping in pings.items() if ping.wait(timeout=PING_S + 5) != 0]


def neighbours_both_ways(lab: Lab) -> dict[int, list[int]]:
    """Each node's neighbours now: the nodes in receive range both ways."""
    one_way = {(link["a"], link["b"]) for link in lab.control("links")["links"] if link["in_rx_range"]}
    neighbours: dict[int, list[int]] = {i: [] for i in range(len(lab))}
    for a, b in one_way:
        if (b, a) in one_way:
            neighbours[a].append(b)
    return neighbours


def farthest(source: int, neighbours: dict[int, list[int]]) -> int | None:
    hops = {source: 0}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for peer in neighbours[node]:
            if peer not in hops:
                hops[peer] = hops[node] + 1
                queue.append(peer)
    target = max(hops, key=lambda node: (hops[node], -node))
    return target if hops[target] >= 2 else None


# --- routes ---

ROUTES_EVERY = 5  # every fifth node pings: ten discoveries one after another


def soak_routes(moving_s: int, seed: int) -> int:
    before = leftovers.snapshot()
    pinged: list[tuple[str, bool, float]] = []
    with tempfile.TemporaryDirectory(prefix="meshemu-soak-") as scratch:
        path = Path(scratch) / "strip.yaml"
        path.write_text(json.dumps({**strip_topology(), "seed": seed}))  # JSON is YAML
        lab = Lab(load_topology(path), "soakroutes")
        try:
            lab.up()
            time.sleep(moving_s)
            lab.control("mobility", node=None, run=False)
            time.sleep(SETTLE_S)
            names = list(lab.nodes)
            neighbours = neighbours_both_ways(lab)
            for source in range(0, len(names), ROUTES_EVERY):
                target = farthest(source, neighbours)
                if target is None:
                    continue
                started = time.monotonic()
                ping = subprocess.run(lab[names[source]].command(["ping", "-c", "1", "-w", str(PING_S), names[target]]),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                pinged.append((f"{names[source]}->{names[target]}", ping.returncode == 0, time.monotonic() - started))
        finally:
            lab.down()
    print(f"routes: strip.yaml's topology at 1-20 m/s, seed {seed}, {moving_s} s moving, {SETTLE_S} s still, "
          f"then one ping after another (deadline {PING_S} s)")
    for pair, answered, seconds in pinged:
        print(f"{pair:>10}: {'reply' if answered else 'no reply'} after {seconds:.1f} s")
    failed = [pair for pair, answered, _ in pinged if not answered]
    print(f"{len(pinged) - len(failed)} of {len(pinged)} answered")
    return report_leftovers(before) or (1 if failed else 0)


# --- cycles ---

def soak_cycles(count: int, topology_path: Path) -> int:
    topology = load_topology(topology_path)
    before = leftovers.snapshot()
    times: dict[str, list[float]] = {"up": [], "down": []}
    for _ in range(count):
        lab = Lab(topology, "soakcycle")
        started = time.perf_counter()
        try:
            lab.up()
            times["up"].append(time.perf_counter() - started)
        finally:
            started = time.perf_counter()
            lab.down()
            times["down"].append(time.perf_counter() - started)
    print(f"cycles: {count} x {topology_path.name} ({len(topology.nodes)} nodes) up and down")
    for phase, values in times.items():
        print(f"{phase:<5} min {min(values):.3f} s, median {statistics.median(values):.3f} s, max {max(values):.3f} s")
    return report_leftovers(before)


# --- kills ---

def soak_kills(count: int, seed: int) -> int:
    draw = random.Random(seed)
    before = leftovers.snapshot()
    left_after: list[int] = []
    cleanup_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="meshemu-soak-") as scratch:
        experiment = Path(scratch) / "killed.yaml"
        experiment.write_text(KILLED)
        for attempt in range(count):
            moment = draw.uniform(0.0, 8.0)
            runner = meshemu("run", str(experiment), "--out", str(Path(scratch) / f"r{attempt}"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(moment)
            runner.kill()
            runner.wait()
            started = time.perf_counter()
            cleanup = meshemu("cleanup", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _, stderr = cleanup.communicate(timeout=120)
            cleanup_s.append(time.perf_counter() - started)
            if cleanup.returncode != 0:
                raise MeshemuError(f"meshemu cleanup failed after kill {attempt + 1}: {stderr}")
            left = leftovers.differences(before, leftovers.snapshot())
            left_after.append(sum(len(change.get("added", [])) if isinstance(change, dict) else 1
                                  for change in left.values()))
            if left:
                print(f"kill {attempt + 1} at {moment:.2f} s left: {json.dumps(left)[:2000]}")
    print(f"kills: {count} SIGKILLs of meshemu run at 0-8 s (seed {seed}), each followed by meshemu cleanup")
    print(f"cleanup min {min(cleanup_s):.2f} s, median {statistics.median(cleanup_s):.2f} s, max {max(cleanup_s):.2f} s")
    print(f"kills after which something was left: {sum(1 for n in left_after if n)} of {count}")
    return report_leftovers(before)


if __name__ == "__main__":
    sys.exit(main())
