"""Which MAC count COPAS should call contention, and at what threshold:
the radio counters of every node, recorded every second (threshold.yaml),
smoothed as copasd smooths them (mu = (1 - alpha) mu + alpha N per second),
on the relays of the paths COPAS chose (its path_selected events) against
every other node.

    python experiments/copas/counters.py results/copas-threshold

Per run and counter, and pooled over a case's seeds where it ran several
(seed `all`): the relays' mu (10th/50th/90th
percentile over relay-seconds), the other nodes' mu, the largest relay mu
of each active path each second (what a probe reports and the threshold is
compared with), and the share of those path-seconds above several
thresholds. Counters (emulator/README.md section 5):
- defers: channel accesses that found or sensed the medium busy, counted
  again at every freeze of a countdown;
- backoffs: random backoffs drawn (after every own frame, every failed
  attempt, and when a frame finds the medium busy): ns-2's backoff starts;
- busy_backoffs: backoffs minus the one after each own frame: the backoffs
  a busy medium or a failed attempt caused.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

from meshemu.experiment.results import read_records

ALPHA = 0.75
THRESHOLDS = (6, 25, 50, 100, 200, 400)
Counters = dict[str, Any]
COUNTERS: dict[str, Callable[[Counters], int]] = {
    "defers": lambda c: c["defers"],
    "backoffs": lambda c: c["backoffs"],
    "busy_backoffs": lambda c: c["backoffs"] - c["tx_data_frames"] - c["tx_broadcast_frames"] - c["retry_drops"],
}


def smoothed(snapshots: list[dict[str, Any]], count: Callable[[Counters], int]) -> dict[str, list[float]]:
    """mu of every node after each snapshot interval (index i: after snapshot i + 1)."""
    mu: dict[str, list[float]] = defaultdict(list)
    for before, after in zip(snapshots, snapshots[1:]):
        seconds = after["t_s"] - before["t_s"]
        for node, counters in after["nodes"].items():
            n = (count(counters) - count(before["nodes"][node])) / seconds
            previous = mu[node][-1] if mu[node] else 0.0
            mu[node].append((1 - ALPHA) * previous + ALPHA * n)
    return mu


def path_timeline(run_dir: Path, names: dict[str, str]) -> list[tuple[float, tuple[str, str, str], list[str]]]:
    """(run time s, (src, dst, role), node names of the path) of every path COPAS selected, in order."""
    t0 = json.loads((run_dir / "clock.json").read_text())["run_t0_wall_ns"] / 1e9
    selected = []
    for events in (run_dir / "routing").glob("*.copas-events.jsonl"):
        for line in events.read_text().splitlines():
            event = json.loads(line)
            if event["event"] != "path_selected":
                continue
            path = [names[address] for address in event["path"]]
            roles = ("forward", "reverse") if event["role"] == "both" else (event["role"],)
            for role in roles:
                selected.append((event["wall"] - t0, (event["src"], event["dst"], role), path))
    return sorted(selected, key=lambda s: s[0])


def percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    pick = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.1, 0.5, 0.9)]
    return "/".join(f"{v:.0f}" for v in pick)


Values = tuple[list[float], list[float], list[float]]  # relays' mu, other nodes' mu, path maxima


def run_values(results: Path, record: dict[str, Any]) -> dict[str, Values]:
    """Per counter, every relay-second's and other node-second's mu and every path-second's maximum."""
    run_dir = results / "runs" / record["run_id"]
    snapshots = [json.loads(line) for line in (run_dir / "stats.jsonl").read_text().splitlines() if line.strip()]
    names = {node["ipv4"]: node["name"] for node in record["config"]["nodes"]}
    selected = path_timeline(run_dir, names)
    values = {}
    for counter, count in COUNTERS.items():
        mu = smoothed(snapshots, count)
        relays, others, path_max = [], [], []
        for i, snapshot in enumerate(snapshots[1:]):
            current: dict[tuple[str, str, str], list[str]] = {}
            for t, key, path in selected:
                if t <= snapshot["t_s"]:
                    current[key] = path
            on_path = {node for path in current.values() for node in path}
            relay_set = {node for path in current.values() for node in path[1:-1]}
            relays += [mu[node][i] for node in relay_set]
            others += [mu[node][i] for node in mu if node not in on_path]
            path_max += [max(mu[node][i] for node in path[1:-1]) for path in current.values() if len(path) > 2]
        values[counter] = (relays, others, path_max)
    return values


def row(params: dict[str, Any], seed: Any, counter: str, values: Values) -> str:
    relays, others, path_max = values
    above = " | ".join(f"{sum(m > t for m in path_max) / len(path_max):.0%}" if path_max else "-" for t in THRESHOLDS)
    return (f"| {params['connections']} | {params['protocol']} | {seed} | {counter} | {percentiles(relays)} "
            f"| {percentiles(others)} | {percentiles(path_max)} | {above} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="results of threshold.yaml (stats_interval 1 s)")
    args = parser.parse_args(argv)
    records = [r for r in read_records(args.results / "runs.jsonl") if r["params"]["protocol"] != "aodv"]
    if not records:
        print(f"{args.results / 'runs.jsonl'}: no COPAS runs recorded", file=sys.stderr)
        return 1
    header = ("| conns | protocol | seed | counter | relays' mu p10/p50/p90 | other nodes' mu p10/p50/p90 "
              "| path max mu p10/p50/p90 | " + " | ".join(f"> {t}" for t in THRESHOLDS) + " |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    groups: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for record in sorted(records, key=lambda r: (int(r["params"]["connections"]), r["params"]["protocol"], r["seed"])):
        groups[(int(record["params"]["connections"]), record["params"]["protocol"])].append(record)
    for group in groups.values():
        runs = [run_values(args.results, record) for record in group]
        for record, values in zip(group, runs):
            for counter in COUNTERS:
                print(row(record["params"], record["seed"], counter, values[counter]))
        if len(runs) > 1:  # the seeds' seconds pooled
            for counter in COUNTERS:
                pooled = tuple(sum((values[counter][k] for values in runs), []) for k in range(3))
                print(row(group[0]["params"], "all", counter, pooled))
    return 0


if __name__ == "__main__":
    sys.exit(main())
