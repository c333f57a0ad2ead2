"""One run in ns-2.35, with the interface of a lab run for the runner
(experiment/execute.py's Execution: `execute() -> Outcome`, `phase`,
`elapsed_s()`, `live_goodput_bps()`):

    scenario.tcl written -> `ns scenario.tcl` in the run's directory (an
    argument list, no shell) -> its trace read line by line -> metrics with
    the lab's names -> the trace deleted

ns-2 runs in virtual time, so runs go in parallel freely. Artefacts in
`runs/<run id>/`: `scenario.tcl` (rerun it there with `ns scenario.tcl` to
get the trace back: ns-2 is deterministic for a seed), `samples.txt`,
`ns.log` (ns-2's own output) and `summary.json` (what the trace held).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from .. import medium
from ..experiment import metrics
from ..experiment.execute import Interrupted, Outcome, RunFailed, run_program
from ..experiment.runs import Run
from . import scenario as ns2_scenario
from .trace import Samples, TraceError, TraceReader, read_samples, tail_time

LOG_FILE = "ns.log"
SUMMARY_FILE = "summary.json"
# Debian's build of ns-2.35's AODV (aodv/aodv.h as shipped), recorded with
# every AODV run: a comparison must know which AODV it compared with (in a
# lab, aodvd's preset ns2 models it).
AODV_BUILD = {"link_layer_detection": True, "hello_messages": False, "local_repair": True, "aodvd_preset": "ns2"}


def ns_version(program: str) -> dict[str, Any]:
    """ns-2's version (`ns-version` in its Tcl) and, on Debian, the package's."""
    result = subprocess.run([program], input="puts [ns-version]; exit\n", capture_output=True, text=True,
                            timeout=60, check=False)
    version = result.stdout.strip().splitlines()[-1:] if result.returncode == 0 else []
    try:
        package = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "ns2"], capture_output=True, text=True,
                                 timeout=60, check=False)
        debian = package.stdout.strip() if package.returncode == 0 else None
    except OSError:
        debian = None
    return {"program": program, "version": version[0] if version else None, "debian_package": debian}


class Ns2Execution:
    def __init__(self, run: Run, artefacts: Path, program: str, version: dict[str, Any], stop: threading.Event,
                 title: str, replicate: int | None = None):
        self.run = run
        self.replicate = replicate  # ns-2's RNG seeded otherwise (scenario.scenario)
        self.dir = artefacts
        self.program = program
        self.version = version
        self.stop = stop
        self.title = title
        self.phase = "starting"

    def elapsed_s(self) -> float:
        """The model time ns-2 has reached."""
        return tail_time(self.dir / ns2_scenario.SAMPLES_FILE) or 0.0

    def live_goodput_bps(self) -> None:
        return None

    def execute(self) -> Outcome:
        run = self.run
        started = time.time()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.phase = "writing the scenario"
        written = ns2_scenario.scenario(run, self._trajectories(), self.title, self.replicate)
        (self.dir / ns2_scenario.SCENARIO_FILE).write_text(written.tcl)
        self.phase = "simulating"
        self._simulate()
        self.phase = "reading the trace"
        samples = read_samples(self.dir / ns2_scenario.SAMPLES_FILE)
        if not samples.finished:
            raise RunFailed(f"ns stopped at {samples.time_s:g} s of {written.end_ns / 1e9:g} s without finishing "
                            f"the scenario (see {self.dir / LOG_FILE})")
        names = [node.name for node in run.topology.nodes]
        trace_path = self.dir / ns2_scenario.TRACE_FILE
        try:
            reader = TraceReader(written.flows, samples.ports, len(names), (run.warmup_ns, run.duration_ns))
            reader.read(trace_path, self._check_stop)
            result = self._metrics(reader, samples, written, names)
        except (TraceError, OSError) as exc:
            raise RunFailed(f"ns-2's output: {exc}") from None
        summary = {"trace_lines": reader.lines, "trace_bytes": trace_path.stat().st_size,
                   "model_time_s": samples.time_s}
        (self.dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=1))
        trace_path.unlink()  # hundreds of MB for a large grid; the scenario writes it again, identical
        section = {**self.version, "scenario": ns2_scenario.SCENARIO_FILE, **written.facts}
        if run.topology.routing_choice.name == "aodv":
            section["aodv"] = AODV_BUILD
        return Outcome(result, None, False, started, time.time() - started, {"ns2": section})

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise Interrupted("stopped")

    def _trajectories(self) -> list[list[dict[str, Any]]]:
        """Every node's path: its position when static, else the model's own
        trajectory until the scenario's end."""
        config = self.run.topology.medium
        if all(node["mobility"]["kind"] == "static" for node in config["nodes"]):
            return [[{"t_ns": 0, "position": node["position"]}] for node in config["nodes"]]
        return medium.trajectories(config, self.run.duration_ns + self.run.measure["drain"])

    def _simulate(self) -> None:
        """`ns scenario.tcl` in the run's directory; Ctrl-C stops it."""
        status = run_program([self.program, ns2_scenario.SCENARIO_FILE], self.dir, self.dir / LOG_FILE, None,
                             self.stop)
        if status != 0:
            tail = (self.dir / LOG_FILE).read_text(errors="replace").strip().splitlines()[-8:]
            raise RunFailed(f"ns exited with {status}: " + (" | ".join(tail) or "no output"))
        if ns2_scenario.UNKNOWN_CC in (self.dir / LOG_FILE).read_text(errors="replace"):
            raise RunFailed(f"ns-2 does not know a flow's congestion control (see {self.dir / LOG_FILE})")

    def _metrics(self, reader: TraceReader, samples: Samples, written: ns2_scenario.Scenario,
                 names: list[str]) -> dict[str, Any]:
        run = self.run
        setups = {setup.name: setup for setup in written.flows}
        flows = []
        for flow in run.flows:
            setup = setups[flow.name]
            base = {**flow.record(), "window_s": (setup.window_ns[1] - setup.window_ns[0]) / 1e9}
            if flow.kind == "udp":
                found = reader.udp_metrics(flow.name, samples.sink.get(flow.name, []), flow.options["rate_bps"])
            else:
                found = reader.tcp_metrics(flow.name, samples.tcp.get(flow.name, []), flow.options["cc"])
            if "error" in found:
                raise RunFailed(f"flow {flow.name}: {found['error']}")
            flows.append({**base, **found})
        delivered = metrics.delivered_data_packets(flows)
        routing = reader.routing()
        routing["normalized_overhead"] = routing["control_packets"] / delivered if delivered else None
        return {"flows": flows, "medium": reader.medium(names), "routing": routing}
