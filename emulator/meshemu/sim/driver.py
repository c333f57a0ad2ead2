"""One run by the model in virtual time, with the interface of a lab run for
the runner (experiment/execute.py's Execution: `execute() -> Outcome`,
`phase`, `elapsed_s()`, `live_goodput_bps()`):

    scenario.json written (sim/scenario.py) -> `meshemu-medium sim
    scenario.json` in the run's directory (an argument list, no shell) ->
    its output read -> metrics with the lab's names

The sim runs in virtual time, so runs go in parallel freely. Artefacts in
`runs/<run id>/`: `scenario.json` (rerun it there with `meshemu-medium sim
scenario.json`: the same seed gives the same output and trace digest),
`output.json` (the sim's output) and `sim.log` (its stderr).

Metrics (experiment/README.md, "The sim driver"): per flow the lab's UDP
metrics as sim/scenario.py maps them; `medium` the counters of every node
over [warmup, duration] (the sim's snapshots at the run's end less those
at the warm-up's end: the NodeCounters a lab reads, through
metrics.medium_metrics); `routing`
that of static routes (nothing sent).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from ..experiment import metrics
from ..experiment.execute import Outcome, RunFailed, run_program
from ..experiment.runs import Run
from . import scenario as sim_scenario

SCENARIO_FILE = "scenario.json"
OUTPUT_FILE = "output.json"
LOG_FILE = "sim.log"
NS = 1_000_000_000


def medium_version(program: str) -> str | None:
    """`meshemu-medium --version`: the model's version."""
    result = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=60, check=False)
    return (result.stdout.strip() or None) if result.returncode == 0 else None


class SimExecution:
    def __init__(self, run: Run, artefacts: Path, program: str, version: str | None, stop: threading.Event):
        self.run = run
        self.dir = artefacts
        self.program = program
        self.version = version
        self.stop = stop
        self.phase = "starting"

    def elapsed_s(self) -> float:
        return 0.0  # the sim reports nothing until it ends

    def live_goodput_bps(self) -> None:
        return None

    def execute(self) -> Outcome:
        run = self.run
        started = time.time()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.phase = "writing the scenario"
        (self.dir / SCENARIO_FILE).write_text(json.dumps(sim_scenario.scenario(run)))
        self.phase = "simulating"
        status = run_program([self.program, "sim", SCENARIO_FILE], self.dir, self.dir / OUTPUT_FILE,
                             self.dir / LOG_FILE, self.stop)
        if status != 0:
            detail = (self.dir / LOG_FILE).read_text(errors="replace").strip() or "no output"
            raise RunFailed(f"meshemu-medium sim exited with {status}: {detail}")
        try:
            output = json.loads((self.dir / OUTPUT_FILE).read_text())
        except json.JSONDecodeError as exc:
            raise RunFailed(f"meshemu-medium sim printed something that is not JSON ({exc})") from None
        section = {"program": self.program, "version": self.version, "scenario": SCENARIO_FILE,
                   "seed": output["seed"], "events": output["events"], "trace_digest": output["trace_digest"]}
        return Outcome(self._metrics(output), None, False, started, time.time() - started, {"sim": section})

    def _metrics(self, output: dict[str, Any]) -> dict[str, Any]:
        run = self.run
        figures = {flow["name"]: flow for flow in output["flows"]}
        flows = []
        for flow in run.flows:  # support.py let UDP flows only through
            flows.append({**flow.record(), "window_s": sim_scenario.window_s(run, flow),
                          **sim_scenario.udp_metrics(run, flow, figures[flow.name])})
        seconds = (run.duration_ns - run.warmup_ns) / NS
        warm, end = (_counters(snapshot["nodes"]) for snapshot in output["snapshots"])
        medium = metrics.medium_metrics(warm, end, seconds)
        delivered = metrics.delivered_data_packets(flows)
        routing = {"control_bytes": 0, "control_packets": 0, "normalized_overhead": 0.0 if delivered else None}
        return {"flows": flows, "medium": medium, "routing": routing}


def _counters(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The sim's per-node entries as a lab's stats: {name: counters}."""
    return {node["name"]: {key: value for key, value in node.items() if key != "name"} for node in nodes}
