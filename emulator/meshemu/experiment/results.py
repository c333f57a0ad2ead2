"""The results directory of an experiment (outside git; `results/<name>/`):

    runs.jsonl      one JSON record per finished run, appended atomically
    runs.csv        the same, flattened (regenerated from runs.jsonl)
    failed.jsonl    runs that failed (not skipped by --resume)
    runs/<run_id>/  each run's artefacts: tool outputs, traces, captures

A record: run_id, experiment, driver (lab or ns2; records from before
drivers have none and are lab runs), params, seed, config, software, started,
duration_s, metrics, lateness, behind_real_time, host (where it ran: this
host's name, or the cluster worker's); ns-2 runs add `ns2`.
"""

from __future__ import annotations

import csv
import fcntl
import importlib.metadata
import io
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterable

RUNS = "runs.jsonl"
FAILED = "failed.jsonl"
CSV = "runs.csv"
ARTEFACTS = "runs"
# The driver of records written before there was a choice.
DEFAULT_DRIVER = "lab"


def software_version() -> dict[str, Any]:
    """The package version and, in a git tree, `git describe --always --dirty`."""
    try:
        version = importlib.metadata.version("meshemu")
    except importlib.metadata.PackageNotFoundError:
        version = None
    here = Path(__file__).resolve().parent
    try:
        described = subprocess.run(["git", "-C", str(here), "describe", "--always", "--dirty"],
                                   capture_output=True, text=True, timeout=10, check=False)
        git = described.stdout.strip() if described.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired):
        git = None
    return {"meshemu": version, "git": git}


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file; a torn last line (a crash while
    appending) is ignored."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "run_id" in record:
            records.append(record)
    return records


class ResultsDir:
    def __init__(self, path: Path):
        self.path = path

    @property
    def runs_file(self) -> Path:
        return self.path / RUNS

    def artefacts(self, run_id: str) -> Path:
        return self.path / ARTEFACTS / run_id

    def partial(self, run_id: str) -> Path:
        return self.path / ARTEFACTS / f"{run_id}.partial"

    def records(self) -> list[dict[str, Any]]:
        return read_records(self.runs_file)

    def driver_records(self, driver: str) -> list[dict[str, Any]]:
        """The records of one driver's runs (records from before drivers are lab runs)."""
        return [record for record in self.records() if record.get("driver", DEFAULT_DRIVER) == driver]

    def recorded_ids(self) -> set[str]:
        return {record["run_id"] for record in self.records()}

    def append(self, record: dict[str, Any], failed: bool = False) -> None:
        """One line, written whole with one write under an exclusive lock and
        fsynced: concurrent runners and crashes never interleave or lose
        half a record."""
        self.path.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        with open(self.path / (FAILED if failed else RUNS), "ab") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            file.write(line)
            file.flush()
            os.fsync(file.fileno())

    def write_csv(self) -> Path:
        rows = [flatten_record(record) for record in self.records()]
        columns: list[str] = []
        for row in rows:
            columns += [key for key in row if key not in columns]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
        target = self.path / CSV
        temporary = target.with_name(f".{CSV}.{os.getpid()}.tmp")
        temporary.write_text(buffer.getvalue())
        os.replace(temporary, target)
        return target


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys; lists of numbers as one JSON cell."""
    flat: dict[str, Any] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            flat.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(value, list):
        flat[prefix] = json.dumps(value)
    else:
        flat[prefix] = value
    return flat


def flatten_record(record: dict[str, Any]) -> dict[str, Any]:
    """A record as one flat row: run_id, driver, params.*, seed, the run's flags, then
    metrics with flows keyed by their name (`flows.f0.goodput_bps`) and the
    medium's and the kernels' totals (`medium.retry_drops`, `kernel.Ip.ForwDatagrams`);
    per-node counters stay in the JSON."""
    row: dict[str, Any] = {"run_id": record["run_id"], "experiment": record.get("experiment"),
                           "driver": record.get("driver", DEFAULT_DRIVER), "host": record.get("host")}
    row.update(flatten(record.get("params", {}), "params"))
    row["seed"] = record.get("seed")
    row["behind_real_time"] = record.get("behind_real_time")
    row["duration_s"] = record.get("duration_s")
    lateness = record.get("lateness") or {}
    for key in ("p99_ns", "max_ns"):
        row[f"lateness.{key}"] = lateness.get(key)
    row.update(flatten(record.get("runner_cpu_s") or {}, "runner_cpu_s"))
    metrics = record.get("metrics", {})
    for flow in metrics.get("flows", []):
        row.update(flatten({key: value for key, value in flow.items() if key not in ("name", "group")},
                           f"flows.{flow['name']}"))
    row.update(flatten(group_totals(metrics.get("flows", [])), "groups"))
    row.update(flatten((metrics.get("medium") or {}).get("total", {}), "medium"))
    row.update(flatten(metrics.get("routing") or {}, "routing"))
    row.update(flatten((metrics.get("kernel") or {}).get("total", {}), "kernel"))
    return row


# Flow figures that add up over a group's flows (bytes and packets per second or in all).
ADDITIVE = ("goodput_bps", "throughput_bps", "offered_bps", "packets_sent", "packets_received")


def group_totals(flows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per group (the flows a `src: all` entry made): how many flows, and the
    sum of each additive figure all of them have."""
    members: dict[str, list[dict[str, Any]]] = {}
    for flow in flows:
        if flow.get("group"):
            members.setdefault(flow["group"], []).append(flow)
    totals: dict[str, dict[str, Any]] = {}
    for group, rows in members.items():
        totals[group] = {"flows": len(rows)}
        for key in ADDITIVE:
            values = [row.get(key) for row in rows]
            if all(isinstance(value, (int, float)) for value in values):
                totals[group][key] = sum(values)  # type: ignore[arg-type]
    return totals


def numeric_columns(rows: Iterable[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for row in rows:
        for key, value in row.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and key not in names:
                names.append(key)
    return names
