"""`meshemu report RESULTS_DIR`: tables of mean and 90% CI per group of runs
(same swept values, across seeds; or with `spread`, their min / median /
max), paired t-tests between the values of one
parameter on the same other values and seeds (over all pairs, and per value
of the x parameter when that is swept too), and plots (PNG and SVG) in
`RESULTS_DIR/report/`: metric vs a parameter with CI error bars, bars per
value (e.g. per hop count), CDFs over runs, and a run's time series.

When the directory holds runs of more than one driver (`meshemu run
--driver`: lab, ns2, sim), `driver` is a parameter like a swept one: groups
split by it, and `--compare driver` pairs the runs of every two drivers that
share the swept values and the seed. `host`, the host a run ran on (`meshemu
run --cluster`), is one when named: `--group host` splits the groups by host.
"""

from __future__ import annotations

import csv
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

from rich.console import Console  # noqa: E402
from rich.markup import escape  # noqa: E402
from rich.table import Table  # noqa: E402

from ..errors import MeshemuError  # noqa: E402
from . import cpu  # noqa: E402
from . import metrics as run_metrics  # noqa: E402
from .runs import short_name  # noqa: E402
from .results import DEFAULT_DRIVER, ResultsDir, flatten_record  # noqa: E402
from .stats import CONFIDENCE, mean_ci, paired_t_test  # noqa: E402

MARKERS = ["o", "s", "^", "D", "v", "x", "+", "*"]
HOPS = "hops"
# The parameter that tells the drivers apart (it is no path of the file).
DRIVER = "driver"
# Where a flat row's metrics are: per flow, per group of flows (src: all), the medium's totals, routing,
# the nodes' kernel counters summed.
METRIC_PREFIXES = ("flows.", "groups.", "medium.", "routing.", "kernel.")
# The host a run ran on (meshemu run --cluster): a parameter when asked for, e.g. --group host.
HOST = "host"


class Dataset:
    """The runs of a results directory as flat rows, with short parameter names."""

    def __init__(self, records: list[dict[str, Any]]):
        self.records = records
        self.rows = [flatten_record(record) for record in records]
        paths: list[str] = []
        for record in records:
            paths += [path for path in record.get("params", {}) if path not in paths]
        self.param_paths = paths
        self.params: dict[str, str | None] = {short_name(path, paths): path for path in paths}
        # Flows of a `src: all` entry: reported by default through their group's total.
        self.grouped = {flow["name"] for record in records for flow in record.get("metrics", {}).get("flows", [])
                        if flow.get("group")}
        if len({record.get("driver", DEFAULT_DRIVER) for record in records}) > 1 and DRIVER not in self.params:
            self.params[DRIVER] = None

    def param(self, row: dict[str, Any], name: str) -> Any:
        path = self.params[name]
        return row.get(name) if path is None else row.get(f"params.{path}")

    def metric_columns(self, wanted: list[str] | None) -> list[str]:
        numeric = [key for key in self.rows[0] if key.startswith(METRIC_PREFIXES)]
        for row in self.rows[1:]:
            numeric += [key for key in row if key.startswith(METRIC_PREFIXES) and key not in numeric]
        numeric = [key for key in numeric if any(_number(row.get(key)) is not None for row in self.rows)]
        if not wanted:
            return [key for key in numeric if key.endswith(".goodput_bps") and key.split(".")[1] not in self.grouped]
        chosen = []
        for name in wanted:
            found = [key for key in numeric if key == name or key.endswith("." + name)]
            if not found:
                raise MeshemuError(f"no metric {name!r} in the results; some that are: "
                                   f"{', '.join(sorted({k.rsplit('.', 1)[-1] for k in numeric})[:20])}")
            chosen += [key for key in found if key not in chosen]
        return chosen

    def x_value(self, row: dict[str, Any], x: str, metric: str) -> Any:
        if x == HOPS:
            flow = metric.split(".")[1] if metric.startswith("flows.") else _first_flow(row)
            return row.get(f"flows.{flow}.hops")
        return self.param(row, x)


def _first_flow(row: dict[str, Any]) -> str | None:
    for key in row:
        if key.startswith("flows.") and key.endswith(".hops"):
            return key.split(".")[1]
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _label(metric: str) -> tuple[str, float]:
    """Axis label and scale of a metric column."""
    name = metric.split(".", 1)[1] if metric.startswith("flows.") else metric
    if metric.endswith("_bps"):
        return name[: -len("_bps")] + " (Mbit/s)", 1e-6
    return name, 1.0


def _sort_key(value: Any) -> tuple[int, Any]:
    number = _number(value)
    return (0, number) if number is not None else (1, str(value))


def report(directory: Path, console: Console, x: str | None = None, group: str | None = None,
           compare: str | None = None, metrics: list[str] | None = None, trace: str | None = None,
           spread: bool = False) -> None:
    results = ResultsDir(directory)
    records = results.records()
    if not records:
        raise MeshemuError(f"no recorded runs in {results.runs_file}")
    data = Dataset(records)
    if HOST in (x, group, compare) and HOST not in data.params:
        data.params[HOST] = None
    for name in (x, group, compare):
        if name is not None and name not in data.params and name != HOPS:
            raise MeshemuError(f"no swept parameter {name!r} (parameters: "
                               f"{', '.join(list(data.params) + [HOPS]) or 'none'})")
    columns = data.metric_columns(metrics)
    if not columns:
        raise MeshemuError("the runs have no goodput to report: choose metrics with --metric")
    x = x or next(iter(data.params), HOPS)
    compare = compare or group
    out_dir = directory / "report"
    out_dir.mkdir(exist_ok=True)
    results.write_csv()
    console.print(summary_table(data, columns, spread))
    _write_summary_csv(data, columns, out_dir / "summary.csv")
    if compare is not None:
        within = x if x in data.params and x != compare else None
        tests = paired_tests(data, columns, compare, within)
        console.print(tests_table(tests, compare, within))
        _write_rows(tests, out_dir / "ttests.csv")
    flagged = sum(bool(record.get("behind_real_time")) for record in records)
    if flagged:
        console.print(f"[yellow]{flagged} of {len(records)} runs fell behind real time (behind_real_time)[/yellow]")
    cpu_line = runner_cpu_line(records)
    if cpu_line:
        console.print(cpu_line)
    drawn = []
    for metric in columns:
        drawn += plot_metric(data, metric, x, group, out_dir)
    if trace:
        drawn += plot_trace(directory, trace, out_dir)
    console.print(f"{len(drawn)} plots (PNG and SVG) and summary.csv in {out_dir}")


def runner_cpu_line(records: list[dict[str, Any]]) -> str | None:
    """The runner's own CPU per lab run (`runner_cpu_s`; experiment/cpu.py),
    median and maximum per phase; None when no record has it."""
    measured = [record["runner_cpu_s"] for record in records if record.get("runner_cpu_s")]
    if not measured:
        return None
    parts = []
    for phase, label in ((cpu.BRING_UP, "bring-up"), (cpu.RUN, "run")):
        values = [seconds[phase] for seconds in measured if phase in seconds]
        if values:
            parts.append(f"{label} {statistics.median(values):.2f} s (max {max(values):.2f})")
    return f"runner CPU per run, median over {len(measured)} runs: " + ", ".join(parts)


# --- tables ---------------------------------------------------------------------------------

def groups(data: Dataset) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Runs with the same swept values (across seeds)."""
    grouped: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in data.rows:
        key = tuple(json.dumps(data.param(row, name)) for name in data.params)
        grouped.setdefault(key, []).append(row)
    return dict(sorted(grouped.items(), key=lambda item: [_sort_key(json.loads(v)) for v in item[0]]))


def _format(value: float, metric: str) -> str:
    _, scale = _label(metric)
    scaled = value * scale
    return f"{scaled:.3f}" if abs(scaled) < 1000 else f"{scaled:.0f}"


def _format_value(value: float, metric: str) -> str:
    """One run's value: a count as the whole number it is."""
    return f"{value:.0f}" if value.is_integer() and not metric.endswith("_bps") else _format(value, metric)


def summary_table(data: Dataset, columns: list[str], spread: bool = False) -> Table:
    """A row per group: mean ± CI of each metric, or min / median / max."""
    what = "min / median / max" if spread else f"mean ± {int(CONFIDENCE * 100)}% confidence interval"
    table = Table(title=f"{what} over seeds ({data.records[0].get('experiment')})")
    for name in data.params:
        table.add_column(escape(name))
    table.add_column("runs", justify="right")
    for metric in columns:
        label, scale = _label(metric)
        table.add_column(escape(label), justify="right")
    for key, rows in groups(data).items():
        cells = [escape(str(json.loads(value))) for value in key] + [str(len(rows))]
        for metric in columns:
            values = [v for v in (_number(row.get(metric)) for row in rows) if v is not None]
            if not values:
                cells.append("-")
                continue
            if spread:
                cells.append(" / ".join(_format_value(value, metric)
                                        for value in (min(values), statistics.median(values), max(values))))
                continue
            estimate = mean_ci(values)
            text = _format(estimate.mean, metric)
            if estimate.half_width is not None:
                text += f" ± {_format(estimate.half_width, metric)}"
            cells.append(text)
        table.add_row(*cells)
    return table


def _write_summary_csv(data: Dataset, columns: list[str], path: Path) -> None:
    rows = []
    for key, group_rows in groups(data).items():
        base = {name: json.loads(value) for name, value in zip(data.params, key)}
        for metric in columns:
            values = [v for v in (_number(row.get(metric)) for row in group_rows) if v is not None]
            if values:
                estimate = mean_ci(values)
                # "runs", not "n": a swept parameter is often called n (topology.generate.n).
                rows.append({**base, "metric": metric, "runs": estimate.n, "mean": estimate.mean,
                             "ci_low": estimate.low, "ci_high": estimate.high, "stdev": estimate.stdev,
                             "min": min(values), "median": statistics.median(values), "max": max(values)})
    _write_rows(rows, path)


def _write_rows(rows: list[dict[str, Any]], path: Path) -> None:
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


ALL = "all"


def paired_tests(data: Dataset, columns: list[str], compare: str, within: str | None = None) -> list[dict[str, Any]]:
    """For every two values a, b of `compare` and every metric: the runs that
    share all other swept values and the seed, a − b, paired t-test — over
    all pairs, and when `within` names another swept parameter, also over
    the pairs of each of its values (pooled pairs mix that parameter's
    effect on the difference into the test's variance)."""
    others = [name for name in data.params if name != compare]
    values = sorted({json.dumps(data.param(row, compare)) for row in data.rows}, key=lambda v: _sort_key(json.loads(v)))
    by_key: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in data.rows:
        key = (json.dumps(data.param(row, compare)), tuple(json.dumps(data.param(row, n)) for n in others), row["seed"])
        by_key[key] = row
    tests = []
    for a, b in itertools.combinations(values, 2):
        for metric in columns:
            pairs: dict[Any, list[tuple[float, float]]] = {ALL: []}
            for (value, rest, seed), row in by_key.items():
                if value != a:
                    continue
                other = by_key.get((b, rest, seed))
                x, y = _number(row.get(metric)), _number(other.get(metric)) if other else None
                if x is None or y is None:
                    continue
                pairs[ALL].append((x, y))
                if within is not None:
                    pairs.setdefault(json.dumps(data.param(row, within)), []).append((x, y))
            per_value = sorted((key for key in pairs if key != ALL), key=lambda v: _sort_key(json.loads(v)))
            for key in [ALL] + per_value:
                if len(pairs[key]) < 2:
                    continue
                test = paired_t_test([p[0] for p in pairs[key]], [p[1] for p in pairs[key]])
                tests.append({"metric": metric, "a": json.loads(a), "b": json.loads(b),
                              "within": key if key == ALL else json.loads(key), "pairs": test.n,
                              "mean_difference": test.mean_difference, "ci_low": test.difference_ci.low,
                              "ci_high": test.difference_ci.high, "t": test.t, "p": test.p})
    return tests


def tests_table(tests: list[dict[str, Any]], compare: str, within: str | None = None) -> Table:
    table = Table(title=f"paired t-tests between values of {compare} (same other parameters and seeds)")
    columns = ["metric", "a", "b"] + ([within] if within else []) + [
        "pairs", f"mean a−b ({int(CONFIDENCE * 100)}% CI)", "t", "p"]
    for column in columns:
        table.add_column(escape(column), justify="right" if column in ("pairs", "t", "p") else "left")
    for test in tests:
        label, scale = _label(test["metric"])
        ci = "" if test["ci_low"] is None else f" [{test['ci_low'] * scale:.3f}, {test['ci_high'] * scale:.3f}]"
        cells = [escape(label), escape(str(test["a"])), escape(str(test["b"]))]
        if within:
            cells.append(escape(str(test["within"])))
        table.add_row(*cells, str(test["pairs"]), f"{test['mean_difference'] * scale:.3f}{ci}",
                      "-" if test["t"] is None else f"{test['t']:.3f}",
                      "-" if test["p"] is None else f"{test['p']:.4f}")
    if not tests:
        table.caption = "no parameter values with at least two matching pairs"
    return table


# --- plots ----------------------------------------------------------------------------------

def _save(figure: Any, out_dir: Path, stem: str) -> list[Path]:
    paths = []
    for suffix in ("png", "svg"):
        path = out_dir / f"{stem}.{suffix}"
        figure.savefig(path, dpi=150, bbox_inches="tight")
        paths.append(path)
    plt.close(figure)
    return paths


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)


def plot_metric(data: Dataset, metric: str, x: str, group: str | None, out_dir: Path) -> list[Path]:
    """metric vs x with CI error bars (one series per group value), bars per
    x value, and the CDF of the metric over runs."""
    label, scale = _label(metric)
    series: dict[Any, dict[Any, list[float]]] = {}
    for row in data.rows:
        value = _number(row.get(metric))
        x_value = data.x_value(row, x, metric)
        if value is None or x_value is None:
            continue
        key = data.param(row, group) if group else None
        series.setdefault(key, {}).setdefault(json.dumps(x_value), []).append(value * scale)
    if not series:
        return []
    drawn: list[Path] = []
    stem = _safe(metric.removeprefix("flows.").replace(".", "-"))
    numeric_x = all(_number(json.loads(v)) is not None for points in series.values() for v in points)
    ordered_x = sorted({v for points in series.values() for v in points}, key=lambda v: _sort_key(json.loads(v)))

    figure, axes = plt.subplots(figsize=(5.5, 3.8))
    for index, (key, points) in enumerate(sorted(series.items(), key=lambda item: _sort_key(item[0]))):
        xs = [v for v in ordered_x if v in points]
        estimates = [mean_ci(points[v]) for v in xs]
        positions = [json.loads(v) if numeric_x else ordered_x.index(v) for v in xs]
        axes.errorbar(positions, [e.mean for e in estimates], yerr=[e.half_width or 0 for e in estimates],
                      marker=MARKERS[index % len(MARKERS)], capsize=3, linewidth=1.2, color="black" if key is None else None,
                      label=None if key is None else f"{group}={key}")
    if not numeric_x:
        axes.set_xticks(range(len(ordered_x)), [str(json.loads(v)) for v in ordered_x])
    axes.set_xlabel(x)
    axes.set_ylabel(label)
    axes.grid(True, linestyle=":", linewidth=0.6)
    if group:
        axes.legend(frameon=False)
    axes.set_title(f"{label}, mean and {int(CONFIDENCE * 100)}% CI", fontsize=9)
    drawn += _save(figure, out_dir, f"{stem}_vs_{_safe(x)}")

    figure, axes = plt.subplots(figsize=(5.5, 3.8))
    keys = sorted(series, key=_sort_key)
    width = 0.8 / len(keys)
    hatches = ["", "//", "..", "xx", "\\\\", "oo"]
    for index, key in enumerate(keys):
        points = series[key]
        xs = [v for v in ordered_x if v in points]
        estimates = [mean_ci(points[v]) for v in xs]
        axes.bar([ordered_x.index(v) + (index - (len(keys) - 1) / 2) * width for v in xs],
                 [e.mean for e in estimates], width, yerr=[e.half_width or 0 for e in estimates], capsize=3,
                 color="0.85" if index % 2 == 0 else "0.55", edgecolor="black", hatch=hatches[index % len(hatches)],
                 label=None if key is None else f"{group}={key}")
    axes.set_xticks(range(len(ordered_x)), [str(json.loads(v)) for v in ordered_x])
    axes.set_xlabel(x)
    axes.set_ylabel(label)
    if group:
        axes.legend(frameon=False)
    drawn += _save(figure, out_dir, f"{stem}_bars_{_safe(x)}")

    figure, axes = plt.subplots(figsize=(5.5, 3.8))
    for index, key in enumerate(keys):
        values = sorted(value for points in series[key].values() for value in points)
        axes.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post",
                  label=None if key is None else f"{group}={key}", color="black" if key is None else None)
    axes.set_xlabel(label)
    axes.set_ylabel("fraction of runs")
    axes.grid(True, linestyle=":", linewidth=0.6)
    if group:
        axes.legend(frameon=False)
    drawn += _save(figure, out_dir, f"{stem}_cdf")
    return drawn


def plot_trace(directory: Path, run_id: str, out_dir: Path) -> list[Path]:
    """Time series of one run: per TCP flow cwnd/ssthresh and SRTT/RTO from
    the tcp_info samples, the sequence/ACK events when captured; radio
    counters over time (busy fraction per node) from stats.jsonl."""
    run_dir = ResultsDir(directory).artefacts(run_id)
    if not run_dir.is_dir():
        raise MeshemuError(f"no artefacts of run {run_id} in {run_dir.parent}")
    drawn: list[Path] = []
    for path in sorted(run_dir.glob("*.tcpinfo.jsonl")):
        flow = path.name.split(".")[0]
        samples = run_metrics.read_jsonl(path)
        port = next((s["dport"] for s in samples), None)
        rows = run_metrics.data_socket(samples, port) if port else []
        if not rows:
            continue
        t0 = rows[0]["time_ns"]
        times = [(row["time_ns"] - t0) / 1e9 for row in rows]
        figure, (top, bottom) = plt.subplots(2, 1, figsize=(6.5, 5), sharex=True)
        top.plot(times, [row["cwnd"] for row in rows], color="black", label="cwnd")
        top.plot(times, [min(row["ssthresh"], 10 * max(r["cwnd"] for r in rows)) for row in rows], color="0.5",
                 linestyle="--", label="ssthresh")
        top.set_ylabel("segments")
        top.legend(frameon=False)
        bottom.plot(times, [row["srtt_us"] / 1e3 for row in rows], color="black", label="SRTT")
        bottom.plot(times, [row["rto_us"] / 1e3 for row in rows], color="0.5", linestyle="--", label="RTO")
        bottom.set_ylabel("ms")
        bottom.set_xlabel("time (s)")
        bottom.legend(frameon=False)
        top.set_title(f"run {run_id}, flow {flow}", fontsize=9)
        drawn += _save(figure, out_dir, f"trace_{run_id}_{_safe(flow)}_tcp")
        events = run_metrics.read_jsonl(run_dir / f"{flow}.events.jsonl")
        data_port = rows[0]["sport"]
        data = [e for e in events if e["kind"] == "data" and e["sport"] == data_port]
        acks = [e for e in events if e["kind"] == "ack" and e["dport"] == data_port]
        if data:
            figure, axes = plt.subplots(figsize=(6.5, 4))
            fresh = [e for e in data if not e["retransmission"]]
            again = [e for e in data if e["retransmission"]]
            axes.plot([(e["time_ns"] - t0) / 1e9 for e in fresh], [e["seq"] / 1448 for e in fresh], ".", markersize=2,
                      color="black", label="data")
            axes.plot([(e["time_ns"] - t0) / 1e9 for e in again], [e["seq"] / 1448 for e in again], "x",
                      markersize=4, color="black", label="retransmission")
            axes.plot([(e["time_ns"] - t0) / 1e9 for e in acks], [e["ack"] / 1448 for e in acks], ".", markersize=1,
                      color="0.6", label="ACK")
            axes.set_xlabel("time (s)")
            axes.set_ylabel("sequence number (1448-byte segments)")
            axes.legend(frameon=False)
            drawn += _save(figure, out_dir, f"trace_{run_id}_{_safe(flow)}_seq")
    snapshots = run_metrics.read_jsonl(run_dir / "stats.jsonl")
    if len(snapshots) > 2:
        figure, axes = plt.subplots(figsize=(6.5, 4))
        for index, name in enumerate(snapshots[0]["nodes"]):
            points = [(later["t_s"], (later["nodes"][name]["busy_ns"] - earlier["nodes"][name]["busy_ns"])
                       / ((later["t_s"] - earlier["t_s"]) * 1e9))
                      for earlier, later in zip(snapshots, snapshots[1:]) if later["t_s"] > earlier["t_s"]]
            axes.plot([p[0] for p in points], [p[1] for p in points], marker=MARKERS[index % len(MARKERS)],
                      markersize=3, label=name)
        axes.set_xlabel("time (s)")
        axes.set_ylabel("busy fraction")
        axes.legend(frameon=False, fontsize=7, ncol=2)
        drawn += _save(figure, out_dir, f"trace_{run_id}_busy")
    return drawn
