"""The COPAS study's table and throughput-over-time plots (Cordeiro et al.,
Figs. 3-8) from the results of random.yaml.

    python experiments/copas/analyse.py results/copas-random [--plots DIR]

Per (nodes, connections, protocol), mean over topologies with its 90% CI
(min-max with fewer than three): aggregate throughput (sum of every
connection's goodput over its life, tcp_info bytes acknowledged), MAC
backoffs and deferrals per second per node, normalized routing overhead
(routing IP bytes sent by every node / data bytes acknowledged end to end),
mean RTT of the connections (tcp_info SRTT; the paper's one-way delay is
not measured), COPAS/AODV throughput ratio (per topology, then averaged),
COPAS's path moves per run (contention reroutes; switches to the other
path after a RERR), the medium's worst p99 lateness. Protocols are the
sweep's `protocol` values (threshold.yaml has several COPAS variants), each
compared with `aodv`. With --plots: Figs. 4-5, the goodput of connection c1
per second for 1 and 5 connections, AODV and COPAS, per network size.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from meshemu.experiment.results import read_records
from meshemu.experiment.stats import mean_ci

BASELINE = "aodv"
PLOTTED = ("aodv", "copas")


def aggregate_bps(record: dict[str, Any]) -> float:
    return sum(flow.get("goodput_bps", 0.0) for flow in record["metrics"]["flows"] if flow["kind"] == "tcp")


def per_node_per_s(record: dict[str, Any], counter: str) -> float:
    """A medium counter per node per second over [warmup, end]."""
    medium = record["metrics"]["medium"]
    seconds = (record["config"]["duration_ns"] - record["config"]["warmup_ns"]) / 1e9
    return medium["total"][counter] / len(medium["nodes"]) / seconds


def normalized_overhead(record: dict[str, Any]) -> float:
    acked = sum(flow.get("bytes_acked", 0) for flow in record["metrics"]["flows"] if flow["kind"] == "tcp")
    control = record["metrics"]["routing"]["control_bytes"]
    return control / acked if acked else float("inf")


def mean_rtt_ms(record: dict[str, Any]) -> float:
    rtts = [flow["rtt_ms"]["mean"] for flow in record["metrics"]["flows"]
            if flow["kind"] == "tcp" and isinstance(flow.get("rtt_ms"), dict) and flow["rtt_ms"].get("mean")]
    return sum(rtts) / len(rtts) if rtts else float("nan")


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    estimate = mean_ci(values)
    if estimate.half_width is not None and len(values) >= 3:
        return f"{estimate.mean:.3g} ± {estimate.half_width:.2g}"
    if len(values) > 1:
        return f"{estimate.mean:.3g} ({min(values):.3g}-{max(values):.3g})"
    return f"{estimate.mean:.3g}"


def path_moves(results: Path, record: dict[str, Any]) -> tuple[int, int] | None:
    """(contention reroutes, RERR switches) of a COPAS run, from its nodes' events (the
    `reroutes` counter also counts the replacement chosen after a RERR)."""
    files = list((results / "runs" / record["run_id"] / "routing").glob("*.copas-events.jsonl"))
    if not files:
        return None
    events = [json.loads(line) for path in files for line in path.read_text().splitlines() if line.strip()]
    reroutes = sum(e["event"] == "path_selected" and e["cause"] == "contention" for e in events)
    return reroutes, sum(e["event"] == "path_switched" for e in events)


def size(record: dict[str, Any]) -> int:
    return int(record["params"].get("nodes", len(record["config"]["nodes"])))


def table(results: Path, records: list[dict[str, Any]]) -> str:
    groups: dict[tuple[int, int, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        params = record["params"]
        groups[(size(record), int(params["connections"]), params["protocol"])].append(record)
    protocols = sorted({p for _, _, p in groups}, key=lambda p: (p != BASELINE, p))
    header = ("| nodes | conns | protocol | topologies | aggregate throughput kbit/s | /AODV | backoffs/s/node "
              "| deferrals/s/node | routing bytes / data byte | RTT ms | reroutes, RERR switches per run "
              "| lateness p99 ms (worst) |")
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for nodes, connections in sorted({(n, c) for n, c, _ in groups}):
        baseline = {r["seed"]: aggregate_bps(r) for r in groups.get((nodes, connections, BASELINE), [])}
        for protocol in protocols:
            runs = groups.get((nodes, connections, protocol), [])
            if not runs:
                continue
            ratios = [aggregate_bps(r) / baseline[r["seed"]] for r in runs if baseline.get(r["seed"])]
            moves = [m for m in (path_moves(results, r) for r in runs) if m is not None]
            lateness = max(r["lateness"]["p99_ns"] for r in runs if r.get("lateness")) / 1e6
            lines.append(
                f"| {nodes} | {connections} | {protocol} | {len(runs)} "
                f"| {summary([aggregate_bps(r) / 1e3 for r in runs])} "
                f"| {summary(ratios) if protocol != BASELINE else ''} "
                f"| {summary([per_node_per_s(r, 'backoffs') for r in runs])} "
                f"| {summary([per_node_per_s(r, 'defers') for r in runs])} "
                f"| {summary([normalized_overhead(r) for r in runs])} "
                f"| {summary([mean_rtt_ms(r) for r in runs])} "
                f"| {', '.join(summary([float(m[i]) for m in moves]) for i in (0, 1)) if moves else ''} "
                f"| {lateness:.1f} |")
    return "\n".join(lines)


def goodput_series(results: Path, record: dict[str, Any], flow: str) -> tuple[list[float], list[float]]:
    """Goodput per second of `flow` (bytes acknowledged, tcp_info) against seconds since its first sample."""
    path = results / "runs" / record["run_id"] / f"{flow}.tcpinfo.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    by_socket: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for line in lines:
        if line.strip():
            sample = json.loads(line)
            by_socket[sample["sport"]].append(sample)
    if not by_socket:
        return [], []
    # iperf3's control connection is sampled too: the data connection is the one that carried the bytes.
    samples = max(by_socket.values(), key=lambda s: s[-1]["bytes_acked"])
    if len(samples) < 2:  # a connection that never opened: one sample, no interval
        return [], []
    t0 = samples[0]["time_ns"]
    bins: dict[int, int] = defaultdict(int)
    for before, after in zip(samples, samples[1:]):
        bins[int((after["time_ns"] - t0) / 1e9)] += max(0, after["bytes_acked"] - before["bytes_acked"])
    seconds = list(range(max(bins) + 1))
    return [float(s) for s in seconds], [bins.get(s, 0) * 8 / 1e3 for s in seconds]


def plots(results: Path, records: list[dict[str, Any]], directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory.mkdir(parents=True, exist_ok=True)
    made = []
    for nodes, figure in ((50, 4), (100, 5)):
        fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True, sharey=True)
        drawn = False
        for row, connections in enumerate((1, 5)):
            for col, protocol in enumerate(PLOTTED):
                ax = axes[row][col]
                runs = [r for r in records if int(r["params"]["nodes"]) == nodes
                        and int(r["params"]["connections"]) == connections and r["params"]["protocol"] == protocol]
                label = "AODV" if protocol == "aodv" else "COPAS"
                ax.set_title(f"{connections} TCP connection{'s' if connections > 1 else ''} ({label})")
                if not runs:
                    continue
                run = min(runs, key=lambda r: r["seed"])
                x, y = goodput_series(results, run, "c1")
                ax.plot(x, y, linewidth=0.8)
                drawn = True
                ax.set_xlabel("time since the connection started (s)")
                ax.set_ylabel("c1 goodput (kbit/s)")
        if not drawn:
            plt.close(fig)
            continue
        fig.suptitle(f"Fig. {figure}: throughput of connection c1 over time, {nodes} nodes (topology seed 1)")
        fig.tight_layout()
        path = directory / f"fig{figure}-{nodes}nodes.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="the results directory of random.yaml")
    parser.add_argument("--plots", type=Path, help="where to write the Figs. 4-5 plots")
    args = parser.parse_args(argv)
    records = read_records(args.results / "runs.jsonl")
    if not records:
        print(f"{args.results / 'runs.jsonl'}: no runs recorded", file=sys.stderr)
        return 1
    print(table(args.results, records))
    if args.plots:
        for path in plots(args.results, records, args.plots):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
