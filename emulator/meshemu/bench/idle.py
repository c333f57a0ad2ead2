"""What an idle lab costs: CPU, wake-ups and memory of its daemons and medium.

    python -m meshemu.bench.idle [--nodes 50,169,500] [--daemons none,aodvd,copasd,bpd,babeld]
                                 [--runs 3] [--settle 5] [--seconds 10]

For each node count N and daemon, a grid of N nodes 200 m apart (ns2-wavelan,
as grid13) comes up with that daemon in every node and no traffic: `none`
(no daemon, no routes), `aodvd` (HELLOs off, link-layer feedback), `copasd`,
`bpd` (backpressure with overhearing, over static routes) and `babeld`. After
`--settle` seconds it is watched for `--seconds`: from /proc, the daemons'
CPU time (/proc/PID/task/*/schedstat, every thread) and wake-ups (voluntary and
involuntary context switches of every thread, /proc/PID/task/*/status), and
the same of the medium; then the daemons' resident and proportional memory
(VmRSS, smaps_rollup Pss) and the medium's. Daemon figures are per node
(and second), the medium's CPU and wake-ups for the whole lab, its memory
per node; min/median/max over `--runs` runs of a fresh lab each.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import MeshemuError
from ..lab import Lab
from .figures import comma_list, spread
from .proc import usage

# Daemon -> the topology's routing and queueing lines.
DAEMONS = {
    "none": ("routing: none", None),
    "aodvd": ("routing: {aodv: {hello_interval: 0s, link_layer_feedback: true}}", None),
    "copasd": ("routing: copas", None),
    "bpd": ("routing: static", "queueing: {mode: backpressure}"),
    "babeld": ("routing: babeld", None),
}


def grid_shape(nodes: int) -> tuple[int, int]:
    """Rows and columns of a grid of exactly `nodes` nodes, as square as its divisors allow."""
    rows = max(d for d in range(1, math.isqrt(nodes) + 1) if nodes % d == 0)
    return rows, nodes // rows


def topology_text(name: str, nodes: int, daemon: str) -> str:
    rows, cols = grid_shape(nodes)
    routing_line, queueing_line = DAEMONS[daemon]
    lines = [f"name: {name}", "profile: ns2-wavelan", "seed: 1", routing_line,
             f"generate: {{kind: grid, rows: {rows}, cols: {cols}, spacing: 200m}}"]
    if queueing_line:
        lines.append(queueing_line)
    return "\n".join(lines) + "\n"


def memory_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, Pss) of a process in KiB."""
    rss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
               if line.startswith("VmRSS:"))
    pss = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
               if line.startswith("Pss:"))
    return rss, pss


@dataclass
class Figures:
    """One run: per node and second for the daemons, per second for the medium."""

    daemon_cpu_percent: float
    daemon_wakeups: float
    daemon_rss_kib: float
    daemon_pss_kib: float
    medium_cpu_percent: float
    medium_wakeups: float
    medium_rss_kib_per_node: float


def measure(nodes: int, daemon: str, settle: float, seconds: float, name: str) -> Figures:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / f"{name}.yaml"
        path.write_text(topology_text(name, nodes, daemon))
        lab = Lab.from_file(path)
        try:
            lab.up()
            daemons = [process.pid for process in lab._spawned]
            if len(daemons) != (0 if daemon == "none" else nodes):
                raise MeshemuError(f"{daemon}: {len(daemons)} daemons running in {nodes} nodes")
            medium = [lab._medium.pid] if lab._medium is not None else []
            time.sleep(settle)
            started = time.monotonic()
            daemons_before, medium_before = usage(daemons), usage(medium)
            time.sleep(seconds)
            daemons_after, medium_after = usage(daemons), usage(medium)
            elapsed = time.monotonic() - started
            memory = [memory_kib(pid) for pid in daemons]
            medium_rss = sum(memory_kib(pid)[0] for pid in medium)
            for process in lab._spawned:
                if process.poll() is not None:
                    raise MeshemuError(f"{daemon} on {process.node} exited with status {process.poll()}")
        finally:
            if lab.run_dir.exists():
                lab.down()
    per_node_second = 1 / (nodes * elapsed)
    return Figures(
        daemon_cpu_percent=100 * (daemons_after.cpu_seconds - daemons_before.cpu_seconds) * per_node_second,
        daemon_wakeups=(daemons_after.switches - daemons_before.switches) * per_node_second,
        daemon_rss_kib=sum(rss for rss, _ in memory) / nodes,
        daemon_pss_kib=sum(pss for _, pss in memory) / nodes,
        medium_cpu_percent=100 * (medium_after.cpu_seconds - medium_before.cpu_seconds) / elapsed,
        medium_wakeups=(medium_after.switches - medium_before.switches) / elapsed,
        medium_rss_kib_per_node=medium_rss / nodes,
    )


COLUMNS = (  # (heading, field, digits)
    ("daemon CPU %", "daemon_cpu_percent", 4),
    ("daemon wake-ups/s", "daemon_wakeups", 2),
    ("daemon RSS KiB", "daemon_rss_kib", 0),
    ("daemon PSS KiB", "daemon_pss_kib", 0),
    ("medium CPU %", "medium_cpu_percent", 2),
    ("medium wake-ups/s", "medium_wakeups", 0),
    ("medium RSS KiB/node", "medium_rss_kib_per_node", 0),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshemu.bench.idle", description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="50,169,500", help="node counts, comma-separated")
    parser.add_argument("--daemons", default=",".join(DAEMONS), help=f"from {', '.join(DAEMONS)}, comma-separated")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds between bring-up and measuring")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds measured")
    parser.add_argument("--name", default="benchidle", help="lab name used for the runs")
    args = parser.parse_args(argv)
    try:
        node_counts = [int(n) for n in comma_list(args.nodes)]
    except ValueError:
        parser.error(f"--nodes: {args.nodes!r} is not a comma-separated list of node counts")
    daemons = comma_list(args.daemons)
    unknown = [d for d in daemons if d not in DAEMONS]
    if unknown:
        parser.error(f"--daemons: unknown {', '.join(unknown)} (known: {', '.join(DAEMONS)})")
    if any(n < 2 for n in node_counts) or args.runs < 1 or args.seconds <= 0 or args.settle < 0:
        parser.error("--nodes at least 2 each, --runs at least 1, --seconds positive, --settle not negative")
    print(f"idle labs: grid, ns2-wavelan; {args.runs} runs each, {args.settle:g} s settle, {args.seconds:g} s "
          "measured; min/median/max; daemon figures per node, medium figures for the whole lab")
    print(f"{'nodes':>5} {'daemon':<7} " + " ".join(f"{heading:>22}" for heading, _, _ in COLUMNS), flush=True)
    for nodes in node_counts:
        for daemon in daemons:
            try:
                runs = [measure(nodes, daemon, args.settle, args.seconds, args.name) for _ in range(args.runs)]
            except MeshemuError as exc:
                print(f"{nodes:>5} {daemon:<7} failed: {exc}", flush=True)
                continue
            cells = [spread([getattr(run, field) for run in runs], digits) for _, field, digits in COLUMNS]
            print(f"{nodes:>5} {daemon:<7} " + " ".join(f"{cell:>22}" for cell in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
