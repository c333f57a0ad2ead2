"""The backpressure study's table and threshold plot (Gupta et al. §3.3,
§4.3-4.5, Fig. 6) from the results of grid13.yaml, grid5.yaml or tdma.yaml.

    python experiments/backpressure/analyse.py results/grid13 [--plot fig6.png]

Per case (mean and 90% CI over seeds): aggregate TCP goodput while the UDP
floods run (tcp_info, [warmup, end]) and as a share of the `initial` case
(no UDP) of the same seed; the same share over the whole test (bytes the
iperf3 servers received, the paper's 150-s totals); UDP goodput; UDP packets
injected (released by the source's bpd; FIFO has no daemon to count them)
and delivered; UDP jitter (RFC 3550) and mean one-way delay; the medium's
worst p99 lateness.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Any, Callable

from meshemu.experiment.results import read_records
from meshemu.experiment.stats import mean_ci

# What the paper reports as aggregate TCP goodput, % of the initial, on its 13x13
# grid with 802.11 (§3.3, §4.3, §4.5), shown beside 802.11 runs (grid13, and
# grid5 for reference); for its TDMA grid it gives no figures.
PAPER_TCP_SHARE = {"initial": "100", "fifo-7-4": "10", "fifo": "33", "fq-source": "42", "fq-destination": "64",
                   "bp-source-1": "82", "bp-destination-1": "similar to bp-source-1"}
BACKPRESSURE = re.compile(r"^bp-(source|destination)-(\d+)$")


def tcp_bps(record: dict[str, Any]) -> float:
    return sum(flow["goodput_bps"] for flow in record["metrics"]["flows"] if flow["kind"] == "tcp")


def tcp_whole_test_bytes(record: dict[str, Any]) -> float:
    return sum(flow.get("received_bytes") or 0 for flow in record["metrics"]["flows"] if flow["kind"] == "tcp")


def udp_flows(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [flow for flow in record["metrics"]["flows"] if flow["kind"] == "udp"]


def udp_mean(record: dict[str, Any], value: Callable[[dict[str, Any]], float | None]) -> float | None:
    """The mean of value(flow) over the run's UDP flows; None when a flow lacks it."""
    values = [value(flow) for flow in udp_flows(record)]
    return None if not values or None in values else sum(values) / len(values)


def paper_share(record: dict[str, Any], case: str) -> str:
    return "" if record["config"]["medium"]["mac"]["kind"] == "tdma" else PAPER_TCP_SHARE.get(case, "")


def estimate(values: list[float], scale: float = 1.0, digits: int = 0) -> str:
    values = [value for value in values if value is not None and not math.isnan(value)]
    if not values:
        return "-"
    found = mean_ci([value * scale for value in values])
    text = f"{found.mean:.{digits}f}"
    return text if found.half_width is None else f"{text} ± {found.half_width:.{digits}f}"


def case_order(name: str) -> tuple[int, str, int]:
    fixed = ["initial", "fifo-7-4", "fifo", "fq-source", "fq-destination", "fq-next-hop", "fq-previous-hop"]
    match = BACKPRESSURE.match(name)
    if match:
        return (len(fixed), match.group(1), int(match.group(2)))
    return (fixed.index(name) if name in fixed else len(fixed) + 1, name, 0)


def table(records: list[dict[str, Any]]) -> tuple[list[list[str]], dict[str, dict[str, list[float]]]]:
    by_case: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        by_case.setdefault(record["params"]["case"], []).append(record)
    initial = {record["seed"]: record for record in by_case.get("initial", [])}
    rows = []
    series: dict[str, dict[str, list[float]]] = {}
    for case in sorted(by_case, key=case_order):
        runs = by_case[case]
        shares = [tcp_bps(r) / tcp_bps(initial[r["seed"]]) for r in runs
                  if r["seed"] in initial and tcp_bps(initial[r["seed"]]) > 0]
        whole = [tcp_whole_test_bytes(r) / tcp_whole_test_bytes(initial[r["seed"]]) for r in runs
                 if r["seed"] in initial and tcp_whole_test_bytes(initial[r["seed"]]) > 0]
        udp = [sum(flow["goodput_bps"] for flow in udp_flows(r)) for r in runs]
        injected = [sum(flow["queueing"]["released"] for flow in udp_flows(r)) for r in runs
                    if udp_flows(r) and all(flow.get("queueing") for flow in udp_flows(r))]
        delivered = [sum(flow["packets_received"] for flow in udp_flows(r)) for r in runs if udp_flows(r)]
        jitter = [udp_mean(r, lambda flow: flow.get("jitter_ms")) for r in runs]
        delay = [udp_mean(r, lambda flow: (flow.get("delay_ms") or {}).get("mean")) for r in runs]
        lateness = max((r["lateness"] or {}).get("p99_ns", math.nan) for r in runs)
        series[case] = {"share": shares, "udp": udp}
        rows.append([case, str(len(runs)), estimate([tcp_bps(r) for r in runs], 1e-3), estimate(shares, 100),
                     estimate(whole, 100), paper_share(runs[0], case), estimate(udp, 1e-3),
                     estimate(injected), estimate(delivered), estimate(jitter, 1, 1), estimate(delay), f"{lateness / 1e6:.1f}"])
    return rows, series


HEADER = ["case", "runs", "TCP kbit/s", "TCP % of initial", "% whole test", "paper %", "UDP kbit/s",
          "UDP injected", "UDP delivered", "UDP jitter ms", "UDP delay ms", "p99 lateness ms"]


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def plot(series: dict[str, dict[str, list[float]]], path: Path) -> None:
    """Fig. 6: TCP share of the initial goodput and UDP goodput against the
    backpressure threshold, fair queuing alone as a level for comparison."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (tcp_axis, udp_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for classify, marker in (("source", "o"), ("destination", "s")):
        points = sorted((int(BACKPRESSURE.match(case).group(2)), values) for case, values in series.items()
                        if BACKPRESSURE.match(case) and BACKPRESSURE.match(case).group(1) == classify)
        for axis, key, scale in ((tcp_axis, "share", 100), (udp_axis, "udp", 1e-3)):
            usable = [(x, mean_ci([v * scale for v in values[key]])) for x, values in points if values[key]]
            if usable:
                axis.errorbar([x for x, _ in usable], [e.mean for _, e in usable],
                              yerr=[e.half_width or 0 for _, e in usable], marker=marker, capsize=3,
                              label=f"backpressure, {classify}")
            fq = series.get(f"fq-{classify}", {}).get(key)
            if fq:
                axis.axhline(mean_ci([v * scale for v in fq]).mean, linestyle="--", linewidth=1,
                             color="C0" if classify == "source" else "C1", label=f"fair queuing, {classify}")
    tcp_axis.set(xlabel="backpressure threshold (packets)", ylabel="TCP goodput, % of initial")
    udp_axis.set(xlabel="backpressure threshold (packets)", ylabel="UDP goodput (kbit/s)")
    for axis in (tcp_axis, udp_axis):
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="results directory of meshemu run (with runs.jsonl)")
    parser.add_argument("--plot", type=Path, help="write the threshold plot (Fig. 6) here (PNG or SVG)")
    args = parser.parse_args()
    records = [r for r in read_records(args.results / "runs.jsonl") if "case" in r.get("params", {})]
    if not records:
        print(f"{args.results / 'runs.jsonl'}: no runs with a case parameter", file=sys.stderr)
        return 1
    rows, series = table(records)
    print(markdown(rows))
    if args.plot:
        plot(series, args.plot)
        print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
