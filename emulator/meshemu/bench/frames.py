"""What a frame costs the medium, and how many it carries in real time.

    python -m meshemu.bench.frames [--groups 40] [--overhearers 0] [--size 64]
                                   [--rates 250,500,1000,1500,2000,2500]
                                   [--seconds 10] [--runs 3] [--medium-cpu 1] [--spin 0us]

The lab is `--groups` groups far apart (80211g, 54 Mbit/s; 400 m between
groups, past carrier-sense range): in each a sender, its receiver 10 m away
and `--overhearers` promiscuous nodes in range of both, so that every frame
the sender's MAC carries is written into 1 + overhearers TAPs. Each sender
sends `--size`-byte UDP datagrams (`meshemu-udp`, static routes) at each of
`--rates` packets per second in turn, one step of `--seconds` after 1 s of
settling. A group's channel carries at most about 5000 such frames a
second, so the steps load the medium's event loop, not the channel.

The medium's one thread is pinned to `--medium-cpu`, and the senders and
receivers to the other cores: a frame written into a TAP runs the
receiving node's network stack in the writer's thread, so that core holds
the loop and the receivers' stacks, the rest the senders' and the
receiving programs. For each step it prints, min/median/max over `--runs`
fresh labs: frames carried per second (acknowledged data frames),
deliveries per second (frames written into TAPs: received and overheard),
the medium's CPU (share of its core) and CPU per carried frame, and the
lateness of the model's actions in that step (p50/p99, from the
differences of the medium's histogram). The last line names the highest
step whose p99 stayed under 100 us in every run. `--spin` is the lab's
`realtime.spin`: events due sooner than that are waited for by polling.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import MeshemuError
from ..lab import Lab, Process
from ..medium import find_program
from ..state import read_state
from .figures import comma_list, spread
from .lateness import quantiles
from .proc import usage

PORT = 5001
GROUP_SPACING_M = 400  # 80211g senses carrier to about 113 m
RECEIVER_M = 10
SETTLE_S = 1.0
AIM_P99_US = 100


def topology_text(name: str, groups: int, overhearers: int, spin: str) -> str:
    """Group g's nodes: sender, receiver, then its overhearers (n0, n1, ... in that order)."""
    lines = [f"name: {name}", "profile: 80211g", "seed: 1", "routing: static", f"realtime: {{spin: {spin}}}",
             "nodes:"]
    index = 0
    for group in range(groups):
        x = group * GROUP_SPACING_M
        places = [(x, 0), (x + RECEIVER_M, 0)] + [(x + RECEIVER_M / 2, 5 * (k + 1)) for k in range(overhearers)]
        for place_x, place_y in places:
            promiscuous = ", promiscuous: true" if overhearers else ""
            lines.append(f"  n{index}: {{position: [{place_x:g}m, {place_y:g}m]{promiscuous}}}")
            index += 1
    return "\n".join(lines) + "\n"


@dataclass
class Step:
    """One rate step of one run."""

    frames_per_s: float
    deliveries_per_s: float
    medium_cpu_percent: float
    cpu_us_per_frame: float
    p50_us: float
    p99_us: float


def counters(lab: Lab) -> tuple[int, int]:
    """(acknowledged data frames, frames delivered into TAPs) of the whole lab."""
    nodes = lab.stats(peers=False).values()
    return (sum(node["tx_data_frames"] for node in nodes),
            sum(node["rx_frames"] + node["overheard_frames"] for node in nodes))


def pin(pid: int, cpus: set[int]) -> None:
    """Pins every thread of `pid` to `cpus`."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cpus)


def send_all(lab: Lab, program: str, senders: list[tuple[str, str]], rate: int, size: int, seconds: float,
             cpus: set[int]) -> list[Process]:
    started = []
    for sender, receiver_ip in senders:
        process = lab[sender].spawn([program, "send", "--dst", f"{receiver_ip}:{PORT}", "--size", str(size),
                                     "--rate", str(rate * size * 8), "--duration", f"{seconds:g}s"])
        pin(process.pid, cpus)
        started.append(process)
    return started


def measure_run(args: argparse.Namespace, rates: list[int]) -> list[Step]:
    group = 2 + args.overhearers
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"{args.name}.yaml"
        path.write_text(topology_text(args.name, args.groups, args.overhearers, args.spin))
        lab = Lab.from_file(path)
        try:
            lab.up()
            medium = read_state(lab.run_dir).medium()
            if medium is None:
                raise MeshemuError("the lab has no medium process")
            others = set(os.sched_getaffinity(0)) - {args.medium_cpu}
            pin(medium.pid, {args.medium_cpu})
            names = list(lab.nodes)
            senders = [(names[g * group], lab[names[g * group + 1]].ip) for g in range(args.groups)]
            program = str(find_program("meshemu-udp"))
            for g in range(args.groups):
                receiver = lab[names[g * group + 1]].spawn([program, "recv", "--port", str(PORT), "--interval", "0s"])
                pin(receiver.pid, others)
            return [measure_step(lab, program, medium.pid, senders, rate, args, others) for rate in rates]
        finally:
            if lab.run_dir.exists():
                lab.down()


def measure_step(lab: Lab, program: str, medium_pid: int, senders: list[tuple[str, str]], rate: int,
                 args: argparse.Namespace, cpus: set[int]) -> Step:
    processes = send_all(lab, program, senders, rate, args.size, SETTLE_S + args.seconds + 0.5, cpus)
    time.sleep(SETTLE_S)
    started = time.monotonic()
    cpu_before, (frames_before, deliveries_before) = usage([medium_pid]), counters(lab)
    lateness_before = lab.control("lateness")["buckets"]
    time.sleep(args.seconds)
    cpu_after, (frames_after, deliveries_after) = usage([medium_pid]), counters(lab)
    lateness_after = lab.control("lateness")["buckets"]
    elapsed = time.monotonic() - started
    for process in processes:
        if process.wait(timeout=10) != 0:
            raise MeshemuError(f"meshemu-udp send on {process.node} exited with status {process.poll()}")
    time.sleep(0.5)  # the queues drain before the next step
    frames = frames_after - frames_before
    cpu_s = cpu_after.cpu_seconds - cpu_before.cpu_seconds
    late = quantiles(lateness_before, lateness_after)
    return Step(frames_per_s=frames / elapsed, deliveries_per_s=(deliveries_after - deliveries_before) / elapsed,
                medium_cpu_percent=100 * cpu_s / elapsed, cpu_us_per_frame=1e6 * cpu_s / frames if frames else 0.0,
                p50_us=late["p50_us"], p99_us=late["p99_us"])


COLUMNS = (  # (heading, field, digits)
    ("frames/s", "frames_per_s", 0),
    ("deliveries/s", "deliveries_per_s", 0),
    ("medium CPU %", "medium_cpu_percent", 1),
    ("CPU us/frame", "cpu_us_per_frame", 2),
    ("lateness p50 us", "p50_us", 0),
    ("lateness p99 us", "p99_us", 0),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshemu.bench.frames", description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--overhearers", type=int, default=0, help="promiscuous nodes per group")
    parser.add_argument("--size", type=int, default=64, help="UDP payload bytes (28 at least)")
    parser.add_argument("--rates", default="250,500,1000,1500,2000,2500", help="packets/s per sender, comma-separated")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds measured per step")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--medium-cpu", type=int, default=1, help="the core the medium is pinned to")
    parser.add_argument("--spin", default="0us", help="the lab's realtime.spin")
    parser.add_argument("--name", default="benchframes", help="lab name used for the runs")
    args = parser.parse_args(argv)
    try:
        rates = [int(rate) for rate in comma_list(args.rates)]
    except ValueError:
        parser.error(f"--rates: {args.rates!r} is not a comma-separated list of packets per second")
    if args.groups < 1 or args.overhearers < 0 or args.runs < 1 or args.seconds <= 0 or not rates \
            or min(rates) < 1 or args.size < 28:
        parser.error("--groups and --runs at least 1, --overhearers not negative, --seconds positive, "
                     "--rates positive, --size at least 28")
    cores = os.sched_getaffinity(0)
    if args.medium_cpu not in cores or len(cores) < 2:
        parser.error(f"--medium-cpu {args.medium_cpu}: needs one of {sorted(cores)} and another core beside it")
    print(f"frames: {args.groups} groups of a sender, a receiver and {args.overhearers} overhearers (80211g), "
          f"{args.size}-byte UDP, medium on core {args.medium_cpu}, spin {args.spin}; {args.runs} runs, "
          f"{args.seconds:g} s a step; min/median/max")
    try:
        runs = [measure_run(args, rates) for _ in range(args.runs)]
    except MeshemuError as exc:
        print(f"frames: {exc}", file=sys.stderr)
        return 1
    print(f"{'pkt/s each':>10} {'offered':>8} " + " ".join(f"{heading:>20}" for heading, _, _ in COLUMNS))
    within_aim = None
    for i, rate in enumerate(rates):
        steps = [run[i] for run in runs]
        cells = [spread([getattr(step, field) for step in steps], digits) for _, field, digits in COLUMNS]
        print(f"{rate:>10} {rate * args.groups:>8} " + " ".join(f"{cell:>20}" for cell in cells))
        if all(step.p99_us < AIM_P99_US for step in steps):
            carried = statistics.median(step.frames_per_s for step in steps)
            within_aim = carried if within_aim is None else max(within_aim, carried)
    print(f"highest step with p99 under {AIM_P99_US} us in every run: "
          + (f"{within_aim:.0f} frames/s (median)" if within_aim is not None else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
