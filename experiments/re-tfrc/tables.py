"""The RE-TFRC study's tables from `meshemu run` results (runs.jsonl).

    python experiments/re-tfrc/tables.py constrained-rate RESULTS_DIR
    python experiments/re-tfrc/tables.py compare RESULTS_DIR [RESULTS_DIR ...]
    python experiments/re-tfrc/tables.py rts-cdf RESULTS_DIR --hops 7

`constrained-rate`: per cap, offered load, throughput, X, MAC drop fraction,
RTT and loss event rate (min/median/max over seeds). `compare`: TFRC and
RE-TFRC runs paired by seed and the other swept values; per group both
modes' min/median/max and RE-TFRC's reductions (MAC drop fraction, RTT, loss
event rate) and throughput gain, min/median/max over the pairs. Several
flows in a run count as one: throughput summed, RTT and loss event rate
averaged over all their feedback. `rts-cdf`: the share of frames whose RTS was retried at most k
times (Fig. 8; a 7th failed attempt is a MAC drop), per mode, over every
run with that hop count. Every table also shows the medium's lateness (the
largest p99 of the row's runs, ms): above 1 ms a run was behind real time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

Record = dict[str, Any]
# ns2-wavelan's short retry limit: an RTS goes out at most 7 times.
RTS_ATTEMPTS = 7


def read_runs(directory: Path) -> list[Record]:
    path = directory / "runs.jsonl"
    if not path.is_file():
        sys.exit(f"{path}: no such file (run `meshemu run ... --out {directory}` first)")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def flows(record: Record) -> list[Record]:
    return [flow for flow in record["metrics"]["flows"] if flow["kind"] == "tfrc"]


def mode(record: Record) -> str:
    return record["config"]["traffic"][0]["options"]["mode"]


def hops(record: Record) -> int:
    return flows(record)[0]["hops"]


def goodput(record: Record) -> float:
    return sum(flow["goodput_bps"] for flow in flows(record))


def rtt(record: Record) -> float | None:
    """Mean over every RTT sample of the run's flows (a starved flow's few
    samples count as few); None without feedback in the window."""
    sampled = [flow for flow in flows(record) if flow["feedback"]]
    if not sampled:
        return None
    return sum(flow["rtt_ms"]["mean"] * flow["feedback"] for flow in sampled) / sum(f["feedback"] for f in sampled)


def loss_event_rate(record: Record) -> float | None:
    """Mean p over every feedback of the run's flows."""
    sampled = [flow for flow in flows(record) if flow["feedback"]]
    if not sampled:
        return None
    return sum(flow["loss_event_rate"] * flow["feedback"] for flow in sampled) / sum(f["feedback"] for f in sampled)


def mac_drops(record: Record) -> float:
    return record["metrics"]["medium"]["total"]["mac_drop_fraction"]


def lateness_ms(records: list[Record]) -> str:
    values = [r["lateness"]["p99_ns"] / 1e6 for r in records if r.get("lateness")]
    return f"{max(values):.1f}" if values else "-"


def spread(values: list[float | None], scale: float = 1.0, digits: int = 0) -> str:
    """min/median/max of the known values (the median alone for one)."""
    values = [value for value in values if value is not None]
    if not values:
        return "-"
    shown = [f"{v * scale:.{digits}f}" for v in (min(values), statistics.median(values), max(values))]
    return shown[1] if len(values) == 1 else "/".join(shown)


def group_key(record: Record) -> tuple[tuple[str, Any], ...]:
    """The swept values other than the mode."""
    return tuple(sorted((name, value) for name, value in record["params"].items() if "mode" not in name))


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
    for row in [header, ["-" * width for width in widths], *rows]:
        print("| " + " | ".join(cell.ljust(width) for cell, width in zip(row, widths)) + " |")


def constrained_rate(records: list[Record]) -> None:
    by_cap: dict[float, list[Record]] = {}
    for record in records:
        by_cap.setdefault(record["config"]["traffic"][0]["options"]["rate_cap_bps"], []).append(record)
    rows = []
    for cap, group in sorted(by_cap.items()):
        flow = [flows(r)[0] for r in group]
        rows.append([f"{cap / 1e3:.0f}", str(len(group)),
                     spread([f["sending_rate_bps"] for f in flow], 1e-3),
                     spread([f["goodput_bps"] for f in flow], 1e-3),
                     spread([f["allowed_rate_bps"] for f in flow], 1e-3),
                     spread([mac_drops(r) for r in group], 100, 2),
                     spread([rtt(r) for r in group]),
                     spread([loss_event_rate(r) for r in group], 100, 2),
                     lateness_ms(group)])
    print_table(["cap kbit/s", "runs", "offered kbit/s", "throughput kbit/s", "X kbit/s", "MAC drops %",
                 "RTT ms", "p %", "lateness p99 ms"], rows)


def reduction(tfrc: float | None, re: float | None) -> float | None:
    return None if tfrc is None or re is None or tfrc == 0 else (tfrc - re) / tfrc


def compare(records: list[Record]) -> None:
    groups: dict[tuple[Any, ...], dict[str, dict[int, Record]]] = {}
    for record in records:
        groups.setdefault(group_key(record), {}).setdefault(mode(record), {})[record["seed"]] = record
    metrics: list[tuple[str, Callable[[Record], float | None], float, int]] = [
        ("MAC drops %", mac_drops, 100, 2), ("RTT ms", rtt, 1, 0), ("p %", loss_event_rate, 100, 2),
        ("throughput kbit/s", goodput, 1e-3, 0)]
    rows = []
    paired = []
    for key, by_mode in groups.items():
        tfrc, re = by_mode.get("tfrc", {}), by_mode.get("re-tfrc", {})
        seeds = sorted(set(tfrc) & set(re))
        if seeds:
            order = [(0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value)) for _, value in key]
            paired.append((hops(tfrc[seeds[0]]), order, key, tfrc, re, seeds))
    for _, _, key, tfrc, re, seeds in sorted(paired, key=lambda item: item[:2]):
        label = ", ".join(f"{name.split('.')[-1]}={value}" for name, value in key) or "-"
        row = [label, f"{hops(tfrc[seeds[0]])}", str(len(seeds))]
        for name, metric, scale, digits in metrics:
            row.append(f"{spread([metric(tfrc[s]) for s in seeds], scale, digits)} → "
                       f"{spread([metric(re[s]) for s in seeds], scale, digits)}")
        for name, metric, _, _ in metrics:
            changes = [reduction(metric(tfrc[s]), metric(re[s])) for s in seeds]
            if name.startswith("throughput"):
                changes = [None if c is None else -c for c in changes]
            row.append(spread(changes, 100))
        row.append(lateness_ms([tfrc[s] for s in seeds] + [re[s] for s in seeds]))
        rows.append(row)
    print_table(["group", "hops", "pairs", "MAC drops % TFRC → RE", "RTT ms TFRC → RE", "p % TFRC → RE",
                 "throughput kbit/s TFRC → RE", "MAC drop reduction %", "RTT reduction %", "p reduction %",
                 "throughput gain %", "lateness p99 ms"], rows)


def rts_cdf(records: list[Record], hop_count: int) -> None:
    histograms: dict[str, list[int]] = {}
    for record in records:
        if hops(record) != hop_count:
            continue
        histogram = record["metrics"]["medium"]["total"]["rts_attempts_hist"]
        summed = histograms.setdefault(mode(record), [0] * len(histogram))
        histograms[mode(record)] = [a + b for a, b in zip(summed, histogram)]
    if not histograms:
        sys.exit(f"no run with {hop_count} hops")
    rows = []
    for name, histogram in sorted(histograms.items()):
        total, running, cells = sum(histogram), 0, []
        for count in histogram[:RTS_ATTEMPTS]:
            running += count
            cells.append(f"{running / total:.3f}")
        rows.append([name, str(total), *cells])
    print_table(["mode", "frames", *[f"≤{k} retries" for k in range(RTS_ATTEMPTS)]], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", choices=["constrained-rate", "compare", "rts-cdf"])
    parser.add_argument("results", nargs="+", type=Path)
    parser.add_argument("--hops", type=int, default=7)
    args = parser.parse_args()
    records = [record for directory in args.results for record in read_runs(directory)]
    if args.table == "constrained-rate":
        constrained_rate(records)
    elif args.table == "compare":
        compare(records)
    else:
        rts_cdf(records, args.hops)


if __name__ == "__main__":
    main()
