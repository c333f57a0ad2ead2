"""Fig. 4 of the TCP-variants paper from the runs of short-path.yaml: per
TCP variant, packets in flight over time with the retransmission timeouts
marked, and segments sent over time; a table of RTOs and time spent waiting
for them.

    python experiments/tcp-variants/fig4.py RESULTS_DIR [--seed N] [--seconds 80] [--out DIR]

The figure shows one seed's runs (default: the first); the table every run.

From each run's sender tcp_info samples (runs/<id>/<flow>.tcpinfo.jsonl):
packets in flight = `unacked` (segments sent and not yet acknowledged), its
running average over the connection so far as in the paper; segments sent =
`data_segs_out`; RTOs as `meshemu.experiment.metrics.rto_times` finds them;
time in RTO inactivity = the time the connection spent in the loss state
(ca_state 4), which it enters at a timeout and leaves once the data
outstanding then is acknowledged. Writes `fig4.png`, `fig4.json` and prints
a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only
import matplotlib.pyplot as plt  # noqa: E402

from meshemu.experiment.metrics import CA_LOSS, data_socket, read_jsonl, rto_times  # noqa: E402
from meshemu.experiment.results import ResultsDir  # noqa: E402

NS = 1_000_000_000
STYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="results directory of short-path.yaml")
    parser.add_argument("--seed", type=int, default=None, help="the seed whose runs to draw (default: the first)")
    parser.add_argument("--seconds", type=float, default=80.0, help="from the connection's start (default 80)")
    parser.add_argument("--out", type=Path, help="where the figure goes (default: RESULTS/report)")
    args = parser.parse_args(argv)
    results = ResultsDir(args.results)
    records = results.records()
    if not records:
        print(f"no recorded runs in {results.runs_file}", file=sys.stderr)
        return 1
    seed = args.seed if args.seed is not None else min(r["seed"] for r in records)
    traces = []
    for record in sorted(records, key=lambda r: r["seed"]):
        try:
            traces.append(VariantTrace(record, results.artefacts(record["run_id"]), args.seconds))
        except ValueError as exc:
            print(f"run {record['run_id']}: {exc}", file=sys.stderr)
            return 1
    drawn = [trace for trace in traces if trace.record["seed"] == seed]
    if not drawn:
        print(f"no runs with seed {seed} in {results.runs_file}", file=sys.stderr)
        return 1
    out = args.out or args.results / "report"
    out.mkdir(parents=True, exist_ok=True)
    summary = [trace.summary() for trace in traces]
    (out / "fig4.json").write_text(json.dumps(summary, indent=1))
    print(markdown_table(summary, args.seconds))
    plot(drawn, out / "fig4.png", args.seconds)
    print(f"\nfigure: {out / 'fig4.png'}")
    return 0


class VariantTrace:
    """The sender's samples of one run, on the connection's time (s)."""

    def __init__(self, record: dict[str, Any], artefacts: Path, seconds: float):
        self.record = record
        self.variant = str(record["params"].get("variant", record["run_id"]))
        flow = next(flow for flow in record["config"]["traffic"] if flow["kind"] == "tcp")
        samples = read_jsonl(artefacts / f"{flow['name']}.tcpinfo.jsonl")
        rows = sorted(data_socket(samples, flow["port"]), key=lambda row: row["time_ns"])
        if not rows:
            raise ValueError("no tcp_info samples of the data connection")
        self.t0 = rows[0]["time_ns"]
        self.rows = [row for row in rows if (row["time_ns"] - self.t0) / NS <= seconds]
        self.seconds = seconds

    def times(self) -> list[float]:
        return [(row["time_ns"] - self.t0) / NS for row in self.rows]

    def running_average_in_flight(self) -> list[float]:
        total, averages = 0.0, []
        for count, row in enumerate(self.rows, start=1):
            total += row["unacked"]
            averages.append(total / count)
        return averages

    def rtos(self) -> list[float]:
        return [(t - self.t0) / NS for t in rto_times(self.rows)]

    def loss_state_s(self) -> float:
        """Time in the loss state: each sample in it counts until the next."""
        return sum((later["time_ns"] - row["time_ns"]) / NS
                   for row, later in zip(self.rows, self.rows[1:]) if row["ca_state"] == CA_LOSS)

    def summary(self) -> dict[str, Any]:
        last = self.rows[-1]
        lateness = self.record.get("lateness") or {}
        return {"variant": self.variant, "run_id": self.record["run_id"], "seed": self.record["seed"],
                "rtos": len(self.rtos()), "rto_times_s": self.rtos(), "loss_state_s": self.loss_state_s(),
                "segments_sent": last["data_segs_out"], "retransmitted": last["total_retrans"],
                "mean_in_flight": self.running_average_in_flight()[-1],
                "goodput_bps": last["bytes_acked"] * 8 / max(1e-9, (last["time_ns"] - self.t0) / NS),
                "lateness_p99_ms": lateness.get("p99_ns", 0) / 1e6}


def plot(traces: list[VariantTrace], path: Path, seconds: float) -> None:
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True)
    for index, trace in enumerate(traces):
        style = STYLES[index % len(STYLES)]
        times = trace.times()
        line, = top.plot(times, trace.running_average_in_flight(), linestyle=style, linewidth=1.2,
                         label=f"{trace.variant} ({len(trace.rtos())} RTOs)")
        averages = trace.running_average_in_flight()
        for rto in trace.rtos():
            # The RTO marked on its variant's curve, as in the paper.
            at = min(range(len(times)), key=lambda i: abs(times[i] - rto))
            top.plot(rto, averages[at], "x", color=line.get_color(), markersize=6)
        bottom.plot(times, [row["data_segs_out"] for row in trace.rows], linestyle=style, linewidth=1.2,
                    color=line.get_color(), label=trace.variant)
    top.set_ylabel("packets in flight (running average)")
    top.set_title("Fig. 4(a): packets in flight, × = retransmission timeout", fontsize=8)
    top.legend(frameon=False, fontsize=7)
    bottom.set_ylabel("data segments sent")
    bottom.set_xlabel("time since the connection started (s)")
    bottom.set_title("Fig. 4(b): segments transmitted over time", fontsize=8)
    bottom.set_xlim(0, seconds)
    bottom.legend(frameon=False, fontsize=7)
    figure.savefig(path, dpi=150, bbox_inches="tight")
    plt.close(figure)


def markdown_table(summary: list[dict[str, Any]], seconds: float) -> str:
    lines = [f"| variant (first {seconds:g} s) | seed | RTOs | in loss state (s) | segments sent | retransmitted | "
             "mean packets in flight | goodput (Mbit/s) | lateness p99 (ms) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in summary:
        lines.append(f"| {row['variant']} | {row['seed']} | {row['rtos']} | {row['loss_state_s']:.1f} | {row['segments_sent']} | "
                     f"{row['retransmitted']} | {row['mean_in_flight']:.1f} | {row['goodput_bps'] / 1e6:.3f} | "
                     f"{row['lateness_p99_ms']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
