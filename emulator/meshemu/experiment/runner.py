"""Carrying out the runs of a plan: `jobs` runs at a time, progress with an
ETA and the live goodput of the runs under way, records appended as runs
finish, Ctrl-C (or SIGTERM) handled cleanly. Each run goes to its driver
(`Runner._execution`): a lab of its own (execute.py), ns-2 (ns2/driver.py)
or the model in virtual time (sim/driver.py).

Ctrl-C sets a stop event that every run checks while it waits: runs under
way stop, tear their labs down and are not recorded; runs not started are
skipped. Further Ctrl-Cs while that happens are acknowledged and ignored, so
the teardown always completes.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import statistics
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from ..errors import MeshemuError
from ..ns2.driver import Ns2Execution, ns_version
from ..sim.driver import SimExecution, medium_version
from .execute import NS2_PROGRAM, SIM_PROGRAM, Execution, Interrupted, Tools
from .plan import Plan
from .runs import NS2, SIM, Run, short_name
from .results import ResultsDir, group_totals, software_version

NS = 1_000_000_000


def select_runs(plan: Plan, only: list[str]) -> list[Run]:
    """Runs matching every `param=value` (a sweep path or its last part, or
    `seed`; values compared as written, several values with commas)."""
    conditions = []
    for text in only:
        name, sep, values = text.partition("=")
        if not sep or not name:
            raise MeshemuError(f"--only {text!r}: expected PARAM=VALUE, e.g. --only seed=1")
        if name == "seed":
            conditions.append((None, set(values.split(","))))
            continue
        matches = [path for path in plan.sweep_paths if path == name or short_name(path, plan.sweep_paths) == name]
        if not matches:
            choices = ", ".join([short_name(p, plan.sweep_paths) for p in plan.sweep_paths] + ["seed"])
            raise MeshemuError(f"--only {text!r}: no swept parameter {name!r} (parameters: {choices})")
        conditions.append((matches[0], set(values.split(","))))
    return [run for run in plan.runs
            if all(str(run.seed if path is None else run.params[path]) in values for path, values in conditions)]


@dataclass
class Summary:
    done: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped_recorded: int = 0
    pending: int = 0
    interrupted: bool = False
    behind_real_time: list[str] = field(default_factory=list)


def execution_of(run: Run, artefacts: Path, tools: Tools, stop: threading.Event, *, lab_name: str, plan_name: str,
                 ns2_version: dict[str, Any], sim_version: str | None) -> Execution | Ns2Execution | SimExecution:
    """The run's driver: ns-2, the sim, or a lab of its own (here or on a
    cluster's worker, experiment/cluster.py)."""
    if run.driver == NS2:
        return Ns2Execution(run, artefacts, tools[NS2_PROGRAM], ns2_version, stop,
                            f"{plan_name}: run {run.run_id}, {run.label()}")
    if run.driver == SIM:
        return SimExecution(run, artefacts, tools[SIM_PROGRAM], sim_version, stop)
    return Execution(run, lab_name, artefacts, tools, stop)


def driver_versions(tools: Tools) -> tuple[dict[str, Any], str | None]:
    """The versions of ns-2 and of the model among `tools`, for the records."""
    ns2 = ns_version(tools[NS2_PROGRAM]) if NS2_PROGRAM in tools.paths else {}
    sim = medium_version(tools[SIM_PROGRAM]) if SIM_PROGRAM in tools.paths else None
    return ns2, sim


class Runner:
    def __init__(self, plan: Plan, results: ResultsDir, jobs: int, console: Console):
        self.plan = plan
        self.results = results
        self.jobs = jobs
        self.console = console
        self.stop = threading.Event()
        self.active: dict[str, tuple[Run, Execution | Ns2Execution | SimExecution]] = {}
        self.lock = threading.Lock()
        self.summary = Summary()
        self.software = software_version()
        self.ns2_version: dict[str, Any] = {}
        self.sim_version: str | None = None
        self.run_seconds: list[float] = []
        self.tag = secrets.token_hex(2)

    def lab_name(self, run: Run) -> str:
        """The run's id and this runner's own tag: two runners of the same
        file at once (another results directory, a CI beside a user) never
        ask for the same namespaces."""
        return f"x{run.run_id[:10]}{self.tag}"

    def _execution(self, run: Run, artefacts: Path, tools: Tools) -> Execution | Ns2Execution | SimExecution:
        return execution_of(run, artefacts, tools, self.stop, lab_name=self.lab_name(run), plan_name=self.plan.name,
                            ns2_version=self.ns2_version, sim_version=self.sim_version)

    def _prepare(self, pending: list[Run]) -> Tools:
        """The programs the runs need, found on this host, and the drivers' versions."""
        tools = Tools.find(pending)
        self.ns2_version, self.sim_version = driver_versions(tools)
        return tools

    # --- one run, in a worker thread ---

    def _one(self, run: Run, tools: Tools) -> None:
        if self.stop.is_set():
            return
        run_id = run.run_id
        partial = self.results.partial(run_id)
        shutil.rmtree(partial, ignore_errors=True)
        execution = self._execution(run, partial, tools)
        with self.lock:
            self.active[run_id] = (run, execution)
        try:
            outcome = execution.execute()
        except Interrupted:
            shutil.rmtree(partial, ignore_errors=True)
            return
        except MeshemuError as exc:
            failed_dir = self.results.artefacts(run_id).with_name(f"{run_id}.failed")
            shutil.rmtree(failed_dir, ignore_errors=True)
            if partial.exists():
                partial.rename(failed_dir)
            self.results.append({"run_id": run_id, "experiment": self.plan.name, "params": run.params,
                                 "seed": run.seed, "error": str(exc), "time": time.time()}, failed=True)
            with self.lock:
                self.summary.failed.append(run_id)
            self.console.print(f"[red]✗[/red] {escape(run.label())}: {escape(str(exc))}")
            return
        finally:
            with self.lock:
                self.active.pop(run_id, None)
        record = {
            "run_id": run_id,
            "experiment": self.plan.name,
            "driver": run.driver,
            "params": run.params,
            "seed": run.seed,
            "config": run.config,
            "software": self.software,
            "started": outcome.started,
            "duration_s": outcome.duration_s,
            "metrics": outcome.metrics,
            "lateness": outcome.lateness,
            "behind_real_time": outcome.behind_real_time,
            "host": socket.gethostname(),  # a cluster's run names its worker's host in outcome.record
            **outcome.record,
        }
        final = self.results.artefacts(run_id)
        shutil.rmtree(final, ignore_errors=True)
        partial.rename(final)
        self.results.append(record)
        with self.lock:
            self.summary.done.append(run_id)
            self.run_seconds.append(outcome.duration_s)
            if outcome.behind_real_time:
                self.summary.behind_real_time.append(run_id)
        self.console.print(f"[green]✓[/green] {escape(run.label())}  {escape(headline(outcome.metrics))}"
                           + ("  [yellow](behind real time)[/yellow]" if outcome.behind_real_time else ""))

    # --- all runs ---

    def run(self, runs: list[Run], resume: bool) -> Summary:
        for line in skipped_notes(self.plan):
            self.console.print(f"[yellow]{escape(line)}[/yellow]")
        recorded = self.results.recorded_ids() if resume else set()
        pending = [run for run in runs if run.run_id not in recorded]
        self.summary.skipped_recorded = len(runs) - len(pending)
        self.summary.pending = len(pending)
        if not pending:
            return self.summary
        tools = self._prepare(pending)
        self.results.path.mkdir(parents=True, exist_ok=True)
        previous = signal.signal(signal.SIGTERM, _raise_interrupt)
        try:
            self._run_all(pending, tools)
        except KeyboardInterrupt:
            self.summary.interrupted = True
            self._stop_all()
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.results.write_csv()
        return self.summary

    def _run_all(self, pending: list[Run], tools: Tools) -> None:
        expected_s = statistics.mean(run.duration_ns / NS for run in pending)
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      TextColumn("{task.fields[note]}"), console=self.console, transient=True,
                      refresh_per_second=2) as progress:  # as often as the loop below updates it
            overall = progress.add_task(f"{self.plan.name}", total=len(pending), note="")
            self.pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="run")
            futures: list[Future[None]] = [self.pool.submit(self._one, run, tools) for run in pending]
            shown: dict[str, TaskID] = {}
            while True:
                finished = sum(future.done() for future in futures)
                progress.update(overall, completed=finished, note=self._eta(len(pending) - finished, expected_s))
                self._show_active(progress, shown)
                if finished == len(futures):
                    break
                time.sleep(0.5)
            self.pool.shutdown()
            for future in futures:
                future.result()  # a bug in a worker surfaces here

    def _eta(self, remaining: int, expected_s: float) -> str:
        if remaining == 0:
            return ""
        # Lab set-up and drain come on top of the planned duration: learn from the finished runs.
        per_run = statistics.mean(self.run_seconds) if self.run_seconds else expected_s + 10
        seconds = int(per_run * remaining / self.jobs)
        return f"ETA {seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"

    def _show_active(self, progress: Progress, shown: dict[str, TaskID]) -> None:
        with self.lock:
            active = dict(self.active)
        for run_id in [run_id for run_id in shown if run_id not in active]:
            progress.remove_task(shown.pop(run_id))
        for run_id, (run, execution) in active.items():
            if run_id not in shown:
                shown[run_id] = progress.add_task(f"  {escape(run.label())}", total=run.duration_ns / NS, note="")
            live = execution.live_goodput_bps()
            note = execution.phase if execution.phase != "running" else (
                f"{live / 1e6:.3f} Mbit/s" if live is not None else "")
            progress.update(shown[run_id], completed=min(execution.elapsed_s(), run.duration_ns / NS), note=note)

    def _stop_all(self) -> None:
        self.stop.set()

        def acknowledge(signum: int, frame: Any) -> None:
            self.console.print("[yellow]still stopping: tearing down the labs under way[/yellow]")

        old_int = signal.signal(signal.SIGINT, acknowledge)
        old_term = signal.signal(signal.SIGTERM, acknowledge)
        try:
            with self.lock:
                count = len(self.active)
            self.console.print(f"[yellow]interrupted: stopping {count} run(s) under way and removing their "
                               "labs[/yellow]")
            pool = getattr(self, "pool", None)
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        finally:
            signal.signal(signal.SIGINT, old_int)
            signal.signal(signal.SIGTERM, old_term)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def skipped_notes(plan: Plan) -> list[str]:
    """One line per reason why runs of the plan cannot run on this machine,
    with the swept values those runs share (variant=vegas)."""
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for skipped in plan.skipped:
        by_reason.setdefault(skipped.reason, []).append(skipped.params)
    notes = []
    for reason, params in by_reason.items():
        shared = [f"{short_name(path, plan.sweep_paths)}={value}" for path, value in params[0].items()
                  if all(other.get(path) == value for other in params)]
        what = f"{len(params)} run{'s' if len(params) != 1 else ''}" + (f" ({' '.join(shared)})" if shared else "")
        notes.append(f"skipping {what}: {reason}")
    return notes


def headline(metrics: dict[str, Any]) -> str:
    """A one-line summary of a run's metrics for the progress log."""
    parts = []
    for flow in metrics.get("flows", []):
        if flow.get("goodput_bps") is not None and not flow.get("group"):
            parts.append(f"{flow['name']} {flow['goodput_bps'] / 1e6:.3f} Mbit/s")
    for group, total in group_totals(metrics.get("flows", [])).items():
        if total.get("goodput_bps") is not None:
            parts.append(f"{group} ({total['flows']} flows) {total['goodput_bps'] / 1e6:.3f} Mbit/s")
    total = (metrics.get("medium") or {}).get("total", {})
    if total:
        parts.append(f"MAC drops {100 * total.get('mac_drop_fraction', 0):.1f}%")
    return ", ".join(parts)


def cores() -> int:
    return os.cpu_count() or 1
