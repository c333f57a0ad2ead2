"""`meshemu run FILE --cluster ADDRESS`: a plan's runs carried out by the
workers of a Dask cluster (clusterhost.py), recorded on the head exactly as
local runs are.

ClusterRunner is the runner with two parts replaced. `_prepare` admits the
workers: each checks that it can carry out the plan's runs
(clusterhost.refusal); one that cannot is named with the reason and gets
none of them. `_execution` gives a RemoteExecution: it submits the run as a
Dask task needing one lab slot on an admitted worker, waits for it and
unpacks the run's files into the runner's partial directory; the runner's
own `_one` then writes the record (or the failure) as for a local run.

Faults: a worker lost mid-run sends nothing back, so nothing is recorded,
and Dask runs the task again on another worker (clusterhost.WORKER_DEATHS in
all); a run that fails is tried again on another host and recorded as
failed once it failed the same way twice (or ATTEMPTS times). Ctrl-C
cancels the tasks; a worker stops a cancelled run and tears its lab down,
and the head waits for that (STOP_GRACE_S at most).
"""

from __future__ import annotations

import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.markup import escape

from ..errors import MeshemuError
from .execute import Interrupted, Outcome, Tools
from .plan import Plan
from .runs import Run
from .clusterhost import LAB_SUFFIX, SLOT, WORKER_DEATHS, ClusterError, Needs, RemoteResult, RemoteRun, run_remote, \
    security, tls_address, unpack, worker_facts
from .results import ResultsDir
from .runner import Runner

ATTEMPTS = 3
STOP_GRACE_S = 60.0
POLL_S = 0.5
# How often the head asks the scheduler which workers there are.
REFRESH_S = 2.0


class Cluster:
    """The head's connection to a scheduler: the workers admitted for one
    plan's runs, and which run started where."""

    def __init__(self, address: str, secret: Path, console: Console):
        from distributed import Client

        self.address = tls_address(address)
        try:
            self.client = Client(self.address, security=security(secret), timeout="20s", set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"cannot reach the cluster's scheduler at {self.address}: {exc}") from None
        self.console = console
        self.topic = f"meshemu-{secrets.token_hex(4)}"
        self.lock = threading.Lock()
        self.needs: Needs | None = None
        self.admitted: dict[str, int] = {}  # worker address -> lab slots
        self.refused: dict[str, str] = {}  # worker address -> why
        self.names: dict[str, str] = {}  # worker address -> name
        self.started: dict[str, tuple[str, float]] = {}  # run id -> (worker, time.monotonic())
        self.refreshed = 0.0
        self.client.subscribe_topic(self.topic, self._on_started)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- admission ---

    def admit(self, needs: Needs) -> int:
        """Ask every worker whether it can carry out runs with these needs;
        the lab slots of those that can. None can: an error naming why."""
        self.needs = needs
        self.refresh()
        if not self.admitted:
            reasons = "; ".join(f"{self.names.get(a, a)}: {why}" for a, why in self.refused.items())
            raise ClusterError(f"no worker of {self.address} can carry out these runs"
                               + (f" ({reasons})" if reasons else ": no worker has joined (meshemu worker ADDRESS)"))
        return sum(self.admitted.values())

    def refresh(self) -> set[str]:
        """Admit workers that joined since, forget those gone; the addresses admitted now."""
        assert self.needs is not None
        with self.lock:
            if time.monotonic() - self.refreshed < REFRESH_S:
                return set(self.admitted)
            self.refreshed = time.monotonic()
        workers = self.client.scheduler_info(n_workers=-1)["workers"]
        with self.lock:
            for gone in set(self.admitted) - set(workers):
                del self.admitted[gone]
            new = [address for address in workers if address not in self.admitted and address not in self.refused]
        if new:
            facts = self.client.run(worker_facts, self.needs, workers=new, on_error="return")
            for address, fact in facts.items():
                if isinstance(fact, BaseException):
                    fact = {"name": address, "refusal": f"its check failed: {fact!r}", "slots": 0}
                self.names[address] = fact["name"]
                if fact["refusal"] is None and fact["slots"] < 1:
                    fact["refusal"] = f"it declares no {SLOT} slot"
                with self.lock:
                    if fact["refusal"] is None:
                        self.admitted[address] = fact["slots"]
                    else:
                        self.refused[address] = fact["refusal"]
                        self.console.print(f"[red]refusing worker {escape(fact['name'])} ({escape(address)}) for these "
                                           f"runs: {escape(fact['refusal'])}[/red]")
        with self.lock:
            return set(self.admitted)

    def refuse(self, address: str, why: str) -> None:
        """A worker that refused a run at its start (it changed since admission)."""
        with self.lock:
            self.admitted.pop(address, None)
            self.refused[address] = why
        self.console.print(f"[red]refusing worker {escape(self.names.get(address, address))}: {escape(why)}[/red]")

    # --- where runs are ---

    def _on_started(self, event: tuple[float, dict[str, Any]]) -> None:
        message = event[1]
        with self.lock:
            before = self.started.get(message["run_id"])
            self.started[message["run_id"]] = (message["host"], time.monotonic())
        if before is not None and before[0] != message["host"]:
            self.console.print(f"[yellow]↻ {escape(message['label'])}: running again on {escape(message['host'])} "
                               f"(it was on {escape(before[0])})[/yellow]")

    def where(self, run_id: str) -> tuple[str, float] | None:
        with self.lock:
            return self.started.get(run_id)


class RemoteExecution:
    """One run on the cluster, with the interface the runner uses for its
    drivers (execute, phase, elapsed_s, live_goodput_bps)."""

    def __init__(self, cluster: Cluster, request: RemoteRun, artefacts: Path, stop: threading.Event):
        self.cluster = cluster
        self.request = request
        self.dir = artefacts
        self.stop = stop
        self.attempt = 0

    @property
    def phase(self) -> str:
        where = self.cluster.where(self.request.run.run_id)
        return "waiting for a lab slot" if where is None else f"on {where[0]}"

    def elapsed_s(self) -> float:
        where = self.cluster.where(self.request.run.run_id)
        return time.monotonic() - where[1] if where else 0.0

    def live_goodput_bps(self) -> None:
        return None

    def execute(self) -> Outcome:
        failures: list[tuple[str, str]] = []  # (worker, error)
        while True:
            result = self._attempt(avoid={host for host, _ in failures})
            if result.refused is not None:
                self.cluster.refuse(result.address, result.refused)
                continue
            shutil.rmtree(self.dir, ignore_errors=True)  # an earlier attempt's files
            unpack(result.artefacts, self.dir)
            if result.outcome is not None:
                return result.outcome
            assert result.error is not None
            failures.append((result.host, result.error))
            errors = [error for _, error in failures]
            if errors.count(result.error) >= 2 or len(failures) >= ATTEMPTS:
                raise MeshemuError("; ".join(f"on {host}: {error}" for host, error in failures))
            self.cluster.console.print(f"[yellow]↻ {escape(self.request.run.label())} failed on {escape(result.host)}"
                                       f" ({escape(result.error)}): trying again elsewhere[/yellow]")

    def _attempt(self, avoid: set[str]) -> RemoteResult:
        """Submit the run to the admitted workers (not to those where it
        failed, while others remain) and wait for its result."""
        from distributed import KilledWorker

        self.attempt += 1
        workers = self._workers(avoid)
        future = self.cluster.client.submit(
            run_remote, self.request, key=f"run-{self.request.run.run_id}-{self.cluster.topic}-{self.attempt}",
            resources={SLOT: 1}, workers=sorted(workers), allow_other_workers=False, pure=False)
        try:
            while not future.done():
                if self.stop.wait(POLL_S):
                    self._cancel(future)
                if not workers & self.cluster.refresh():
                    # Every worker it may run on is gone: submit again to those admitted now.
                    future.cancel()
                    return self._attempt(avoid)
            return future.result()
        except KilledWorker:
            # Dask ran it again after each loss already (clusterhost.WORKER_DEATHS): no more.
            raise MeshemuError(f"its worker was lost {WORKER_DEATHS} times while it ran") from None

    def _workers(self, avoid: set[str]) -> set[str]:
        """The admitted workers, waiting for one when none is left."""
        while True:
            admitted = self.cluster.refresh()
            if admitted:
                preferred = {a for a in admitted if self.cluster.names.get(a) not in avoid}
                return preferred or admitted
            if self.stop.wait(1.0):
                raise Interrupted("stopped")

    def _cancel(self, future: Any) -> NoReturn:
        """Ctrl-C: cancel the task and wait until its worker has stopped the run."""
        started = self.cluster.where(self.request.run.run_id) is not None
        future.cancel()
        if started:
            deadline = time.monotonic() + STOP_GRACE_S
            while self._still_running(future.key) and time.monotonic() < deadline:
                time.sleep(POLL_S)
        raise Interrupted("stopped")

    def _still_running(self, key: str) -> bool:
        def executing(dask_worker: Any = None) -> bool:
            task = dask_worker.state.tasks.get(key)
            return task is not None and task.state in ("executing", "cancelled", "long-running")

        answers = self.cluster.client.run(executing, on_error="return")
        return any(answer is True for answer in answers.values())


class ClusterRunner(Runner):
    """The runner, with every run carried out on the cluster."""

    def __init__(self, plan: Plan, results: ResultsDir, jobs: int | None, console: Console, cluster: Cluster):
        super().__init__(plan, results, jobs or 0, console)
        self.cluster = cluster
        self.max_jobs = jobs

    def _prepare(self, pending: list[Run]) -> Tools:
        slots = self.cluster.admit(Needs.of(pending, self.software))
        self.jobs = min(slots, self.max_jobs) if self.max_jobs else slots
        admitted = ", ".join(sorted(self.cluster.names[a] for a in self.cluster.admitted))
        self.console.print(f"cluster {self.cluster.address}: {slots} lab slot{'s' if slots != 1 else ''} on "
                           f"{escape(admitted)}; {self.jobs} run{'s' if self.jobs != 1 else ''} at once")
        return Tools()

    def lab_prefix(self, run: Run) -> str:
        """As the runner's lab names (x, the run id's start, this runner's
        tag), shorter by the worker's suffix: lab names have 16 characters at most."""
        return f"x{run.run_id[:11 - LAB_SUFFIX]}{self.tag}"

    def _execution(self, run: Run, artefacts: Path, tools: Tools) -> RemoteExecution:
        request = RemoteRun(run, self.cluster.needs, self.lab_prefix(run), self.plan.name, self.cluster.topic)
        return RemoteExecution(self.cluster, request, artefacts, self.stop)
