"""One run of an experiment in a lab of its own, in real time.

    lab up -> node settings -> receivers and probes -> (time 0) flows start and
    stop on schedule, radio counters at warm-up end and at the end -> drain ->
    everything stopped -> lab down -> metrics from the tools' outputs

Every wait checks the stop event (Ctrl-C): the run then raises `Interrupted`
and its lab is torn down all the same. Programs run in the nodes with
argument lists; their outputs are the run's artefacts.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .. import kernelstats, medium, procs, queueing, routing
from ..choices import Aodv
from ..errors import MeshemuError
from ..lab import Lab, Node, Process
from ..sim import scenario as sim_scenario
from ..view import flows as view_flows
from ..view.record import RECORD_FILE, Recorder
from . import cpu, metrics, pcap
from .runs import NS2, SIM, Flow, Run

NS = 1_000_000_000
# Sinks that need time 0 (meshemu-udp's) and probes get this long to start before it.
LEAD_S = 1.5
# Servers that need no time 0 (iperf3's, tfrc's receiver) start before it is set and may take this long to
# listen: under a VM's software emulation a server takes seconds to start where the host takes milliseconds.
SERVER_START_S = 30.0
# meshemu-udp senders are started this long before their flow (at most from time 0).
SENDER_LEAD_NS = 500_000_000
# How long clients may take to finish after their stop time (iperf3's final
# exchange over a congested multi-hop path) before they are stopped.
CLIENT_GRACE_S = 10.0
PROCESS_GRACE_S = 3.0
# The queueing daemons' final counters, per node, among a run's artefacts.
QUEUEING_FILE = "bpd.json"
# Where a run keeps its routing daemons' events and counters.
ROUTING_DIR = "routing"
# ns-2.35's program (Debian package ns2), for runs of the ns-2 driver.
NS2_PROGRAM = "ns"
# The model's program, for runs of the sim driver.
SIM_PROGRAM = medium.MEDIUM_PROGRAM


class Interrupted(MeshemuError):
    """The run was stopped before its end (Ctrl-C)."""


class RunFailed(MeshemuError):
    """A tool of the run failed; the run has no valid result."""


@dataclass
class Tools:
    """Absolute paths of the programs runs start in nodes."""

    paths: dict[str, str] = field(default_factory=dict)

    @classmethod
    def find(cls, runs: list[Run]) -> "Tools":
        return cls.locate(cls.needed(runs))

    @staticmethod
    def needed(runs: list[Run]) -> set[str]:
        """The names of the programs the runs start."""
        needed = set()
        for run in runs:
            if run.driver == NS2:
                needed.add(NS2_PROGRAM)
                continue
            if run.driver == SIM:
                needed.add(SIM_PROGRAM)
                continue
            needed |= {"sysctl", "ip"}
            for flow in run.flows:
                if flow.kind == "tcp":
                    needed |= {"iperf3", "meshemu-tcpprobe"}
                    if run.measure["capture"]:
                        needed.add("tcpdump")
                elif flow.kind == "udp":
                    needed.add("iperf3" if flow.options["tool"] == "iperf3" else "meshemu-udp")
                elif flow.kind == "tfrc":
                    needed.add("tfrc")
        return needed

    @classmethod
    def locate(cls, needed: set[str]) -> "Tools":
        """The programs by name on this host; a clear error names those missing."""
        tools = cls()
        missing = []
        for name in sorted(needed):
            if name.startswith("meshemu-") or name == "tfrc":
                try:
                    tools.paths[name] = str(medium.find_program(name))
                except MeshemuError:
                    missing.append(name)
            else:
                found = shutil.which(name)
                if found is None:
                    missing.append(name)
                else:
                    tools.paths[name] = found
        if missing:
            raise MeshemuError(f"programs the experiment needs are missing: {', '.join(missing)} "
                               "(./setup.sh installs and builds them; ns is Debian's ns2)")
        return tools

    def __getitem__(self, name: str) -> str:
        return self.paths[name]


@dataclass
class Started:
    """A program the run started."""

    role: str  # server (exits by itself) | sink (stopped by us) | client | probe | capture | command
    flow: Flow
    process: Process
    stdout: Path
    stderr: Path
    stopped: bool = False  # still running when the run stopped it


@dataclass
class Outcome:
    metrics: dict[str, Any]
    lateness: dict[str, Any] | None
    behind_real_time: bool
    started: float  # unix time
    duration_s: float
    record: dict[str, Any] = field(default_factory=dict)  # what the driver adds to the record (ns2: its section)


def run_program(argv: list[str], cwd: Path, stdout: Path, stderr: Path | None, stop: threading.Event) -> int:
    """A program of a virtual-time driver (ns, meshemu-medium sim) in `cwd`,
    its output into files (stderr None: into stdout's); the stop event
    (Ctrl-C) terminates it and raises Interrupted. Its exit status."""
    with open(stdout, "wb") as out, open(stderr, "wb") if stderr else contextlib.nullcontext() as err:
        process = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT if err is None else err)
        try:
            while True:
                try:
                    return process.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    if stop.is_set():
                        raise Interrupted("stopped") from None
        finally:
            if process.poll() is None:
                process.terminate()
                process.wait()


# The RE-TFRC settings of a tfrc flow's options, as `tfrc send` options.
RE_TFRC_OPTIONS = (("re_hops", "--hops"), ("phy", "--phy"), ("contenders_end", "--contenders-end"),
                   ("contenders_middle", "--contenders-middle"), ("max_cut", "--re-max-cut"),
                   ("tolerance", "--re-tolerance"))


def tfrc_send_options(options: dict[str, Any]) -> list[str]:
    """`tfrc send` options for a tfrc flow's planned options; plain TFRC
    leaves out RE-TFRC's settings (the tool refuses --hops without it)."""
    argv = ["--size", str(options["packet"]), "--mode", options["mode"]]
    if options["rate_cap_bps"]:
        argv += ["--max-rate", f"{options['rate_cap_bps']}bps"]
    if options["mode"] == "re-tfrc":
        for key, option in RE_TFRC_OPTIONS:
            if options[key] is not None:
                argv += [option, str(options[key])]
    return argv


class Execution:
    def __init__(self, run: Run, lab_name: str, artefacts: Path, tools: Tools, stop: threading.Event):
        self.run = run
        self.lab_name = lab_name
        self.dir = artefacts
        self.tools = tools
        self.stop = stop
        self.started: list[Started] = []
        self.files: list[IO[bytes]] = []
        self.t0_wall_ns = 0
        self.t0_mono = 0.0
        self.phase = "starting"

    # --- waiting ---

    def _sleep_until(self, run_time_s: float) -> None:
        while True:
            remaining = self.t0_mono + run_time_s - time.monotonic()
            if remaining <= 0:
                return
            if self.stop.wait(min(remaining, 0.2)):
                raise Interrupted("stopped")

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise Interrupted("stopped")

    def elapsed_s(self) -> float:
        return time.monotonic() - self.t0_mono if self.t0_mono else 0.0

    # --- programs ---

    def _spawn(self, node: Node, role: str, flow: Flow, suffix: str, argv: list[str]) -> Started:
        stdout = self.dir / f"{flow.name}.{suffix}"
        stderr = self.dir / f"{flow.name}.{suffix}.err"
        out, err = open(stdout, "wb"), open(stderr, "wb")
        self.files += [out, err]
        process = node.spawn(argv, stdout=out, stderr=err)
        started = Started(role, flow, process, stdout, stderr)
        self.started.append(started)
        return started

    def _window_ns(self, flow: Flow) -> tuple[int, int]:
        """The flow's measurement window, wall-clock ns."""
        start = max(self.run.warmup_ns, flow.start_ns)
        return self.t0_wall_ns + start, self.t0_wall_ns + flow.stop_ns

    def _wait_listening(self, node: Node, started: Started, protocol: str, port: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not procs.listening(started.process.pid, protocol, port):
            if started.process.poll() is not None or time.monotonic() > deadline:
                raise RunFailed(f"nothing listens on {protocol} port {port} in {node.name} after {seconds:g} s")
            self._check_stop()
            time.sleep(0.02)

    @staticmethod
    def _has_sink(flow: Flow) -> bool:
        """A meshemu-udp flow: its receiver is given the window, so it starts once time 0 is set."""
        return flow.kind == "udp" and flow.options["tool"] != "iperf3"

    def _start_servers(self, lab: Lab) -> None:
        """The receivers that need no time 0, before it is set: iperf3's servers and tfrc's receivers."""
        for flow in self.run.flows:
            if flow.kind == "command" or self._has_sink(flow):
                continue
            assert flow.dst is not None and flow.port is not None
            dst = lab[flow.dst]
            if flow.kind == "tfrc":
                server = self._spawn(dst, "server", flow, "recv.jsonl",
                                     [self.tools["tfrc"], "recv", "--bind", f"0.0.0.0:{flow.port}", "--once", "--json",
                                      "-", "--quiet"])
                self._wait_listening(dst, server, "udp", flow.port, SERVER_START_S)
            else:  # tcp, or udp through iperf3 (its control connection is TCP)
                server = self._spawn(dst, "server", flow, "server.json",
                                     [self.tools["iperf3"], "-s", "-1", "-J", "-p", str(flow.port)])
                self._wait_listening(dst, server, "tcp", flow.port, SERVER_START_S)

    def _start_sinks_and_probes(self, lab: Lab) -> None:
        """meshemu-udp's sinks and the TCP flows' probes and captures, once time 0 is set."""
        for flow in self.run.flows:
            if flow.kind == "command":
                continue
            assert flow.dst is not None and flow.src is not None and flow.port is not None
            dst, src = lab[flow.dst], lab[flow.src]
            if self._has_sink(flow):
                start, end = self._window_ns(flow)
                sink = self._spawn(dst, "sink", flow, "recv.jsonl",
                                   [self.tools["meshemu-udp"], "recv", "--port", str(flow.port), "--json",
                                    "--interval", "1s", "--window-start", str(start), "--window-end", str(end)])
                self._wait_listening(dst, sink, "udp", flow.port, LEAD_S)
            if flow.kind == "tcp":
                interval_ms = self.run.measure["tcp_trace"] / 1e6
                self._spawn(src, "probe", flow, "tcpinfo.jsonl",
                            [self.tools["meshemu-tcpprobe"], "--port", str(flow.port), "--interval",
                             f"{interval_ms:g}ms"])
                if self.run.measure["capture"]:
                    self._spawn(src, "capture", flow, "tcpdump.out",
                                [self.tools["tcpdump"], "-i", "wlan0", "-s", "96", "-U", "-n", "-w",
                                 str(self.dir / f"{flow.name}.pcap"), "tcp", "port", str(flow.port)])

    def _start_client(self, lab: Lab, flow: Flow) -> None:
        if flow.kind == "command":
            assert flow.src is not None
            self._spawn(lab[flow.src], "command", flow, "out", list(flow.options["argv"]))
            return
        assert flow.src is not None and flow.dst is not None and flow.port is not None
        src, dst = lab[flow.src], lab[flow.dst]
        seconds = (flow.stop_ns - flow.start_ns) / NS
        if flow.kind == "tcp":
            argv = [self.tools["iperf3"], "-c", dst.ip, "-p", str(flow.port), "-t", str(round(seconds)), "-J",
                    "-i", "1"]
            options = flow.options
            if options["cc"]:
                argv += ["-C", options["cc"]]
            if options["mss"]:
                argv += ["-M", str(options["mss"])]
            if options["window"]:
                argv += ["-w", str(options["window"])]
            self._spawn(src, "client", flow, "client.json", argv)
        elif flow.kind == "udp" and flow.options["tool"] == "iperf3":
            self._spawn(src, "client", flow, "client.json",
                        [self.tools["iperf3"], "-c", dst.ip, "-u", "-p", str(flow.port), "-t", str(round(seconds)),
                         "-b", str(flow.options["rate_bps"]), "-l", str(flow.options["packet"]), "-J", "-i", "1"])
        elif flow.kind == "udp":
            start, end = self._window_ns(flow)
            self._spawn(src, "client", flow, "send.json",
                        [self.tools["meshemu-udp"], "send", "--dst", f"{dst.ip}:{flow.port}",
                         "--rate", str(flow.options["rate_bps"]), "--size", str(flow.options["packet"]),
                         "--duration", f"{flow.stop_ns - flow.start_ns}ns", "--flow-id", str(flow.port),
                         "--start", str(int(self.t0_mono * NS) + flow.start_ns),
                         "--json", "--window-start", str(start), "--window-end", str(end)])
        else:
            argv = [self.tools["tfrc"], "send", f"{dst.ip}:{flow.port}", "--duration", f"{seconds:g}s",
                    *tfrc_send_options(flow.options), "--json", "-", "--quiet",
                    "--trace", str(self.dir / f"{flow.name}.trace.jsonl")]
            self._spawn(src, "client", flow, "send.json", argv)

    def _stop_flow_commands(self, flow: Flow) -> None:
        for started in self.started:
            if started.flow is flow and started.role == "command" and started.process.poll() is None:
                started.process.terminate()

    def _wait_exit(self, roles: set[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for started in self.started:
            if started.role not in roles:
                continue
            while started.process.poll() is None and time.monotonic() < deadline:
                if self.stop.wait(0.05):
                    raise Interrupted("stopped")

    def _terminate(self, roles: set[str] | None = None) -> None:
        """SIGTERM (SIGKILL after a grace) to the programs still running."""
        running = [s for s in self.started if (roles is None or s.role in roles) and s.process.poll() is None]
        for started in running:
            started.stopped = True
            started.process.terminate()
        deadline = time.monotonic() + PROCESS_GRACE_S
        for started in running:
            while started.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if started.process.poll() is None:
                started.process.kill()
                started.process.wait()

    # --- node settings ---

    def _apply_settings(self, lab: Lab) -> None:
        for node_name, settings in self.run.sysctl.items():
            for key, value in settings.items():
                lab[node_name].run([self.tools["sysctl"], "-q", "-w", f"{key}={value}"], timeout=10, check=True)
        for node_name in self.run.routes_quickack:
            set_quickack(lab[node_name], self.tools["ip"])

    # --- live figures ---

    def live_goodput_bps(self) -> float | None:
        """Goodput of the flows running now, from the last samples and reports."""
        total = None
        for started in list(self.started):
            if started.process.poll() is not None:
                continue
            rate = None
            if started.role == "probe":
                rows = [row for row in metrics.read_tail(started.stdout) if row.get("dport") == started.flow.port]
                connections: dict[int, list[dict[str, Any]]] = {}
                for row in rows:
                    connections.setdefault(row["sport"], []).append(row)
                if connections:
                    busiest = max(connections.values(), key=lambda r: r[-1]["bytes_acked"])
                    first, last = busiest[0], busiest[-1]
                    if last["time_ns"] > first["time_ns"]:
                        rate = (last["bytes_acked"] - first["bytes_acked"]) * 8e9 / (last["time_ns"] - first["time_ns"])
            elif started.role == "sink":
                intervals = [row for row in metrics.read_tail(started.stdout) if row.get("type") == "interval"]
                if intervals:
                    rate = intervals[-1]["bytes"] * 8.0
            if rate is not None:
                total = (total or 0.0) + rate
        return total

    # --- the run ---

    def execute(self) -> Outcome:
        run = self.run
        self.dir.mkdir(parents=True, exist_ok=True)
        started_at = time.time()
        self.cpu = cpu.PhaseClock()
        # Held until time 0, so that the flows meet the motion ns-2 and the sim show at their times.
        lab = Lab(run.topology, name=self.lab_name, hold_mobility=True)
        snapshots: list[dict[str, Any]] = []
        lateness = None
        control = None
        queue_counters = None
        recorder: Recorder | None = None
        clock: dict[str, int] = {}
        try:
            self.phase = "bringing up the lab"
            lab.up()
            self._check_stop()
            self._apply_settings(lab)
            self.phase = "starting receivers"
            self._start_servers(lab)
            self.t0_wall_ns = time.time_ns() + int(LEAD_S * NS)
            self.t0_mono = time.monotonic() + LEAD_S
            clock = self._write_clock(lab)
            lab.resume_mobility(from_ns=clock["motion_t0_mono_ns"] - clock["model_t0_mono_ns"])
            flows = view_flows.run_flows(list(run.flows))
            view_flows.write_run_flows(lab.run_dir, self.dir, flows)  # for `meshemu view` of this lab
            if run.measure.get("view"):
                recorder = Recorder(lab, flows, self.dir / RECORD_FILE, run.measure["view"] / NS)
                recorder.start()
            self._start_sinks_and_probes(lab)
            self._sleep_until(0)
            self.cpu.end(cpu.BRING_UP)
            self.phase = "running"
            for when_ns, action, flow in self._schedule():
                self._sleep_until(when_ns / NS)
                if action in ("snapshot", "edge"):
                    snapshot = {"t_s": self.elapsed_s(), "nodes": lab.stats(peers=False)}
                    if action == "edge":  # the window's edges: what the record's counters span
                        snapshot |= {"window_edge": True, "kernel": lab.kernel_counters()}
                    snapshots.append(snapshot)
                elif action == "start":
                    assert flow is not None
                    self._start_client(lab, flow)
                elif action == "stop":
                    assert flow is not None
                    self._stop_flow_commands(flow)
            lateness = lab.control("lateness")
            self.cpu.end(cpu.RUN)
            if recorder is not None:
                recorder.stop()
            self.phase = "draining"
            self._wait_exit({"client"}, CLIENT_GRACE_S)
            self._sleep_until((run.duration_ns + run.measure["drain"]) / NS)
            # iperf3 and tfrc servers end after the client's final exchange.
            self._wait_exit({"server"}, CLIENT_GRACE_S)
            control = routing.control_traffic(lab)
            if lab.queueing.runs_daemon:
                queue_counters = queueing.stop(lab)
            routing.save_outputs(lab, self.dir / ROUTING_DIR)
        finally:
            self.phase = "tearing down"
            if recorder is not None:
                recorder.stop()
            self._terminate()
            lab.down()
            for file in self.files:
                file.close()
        self._record_processes()
        if recorder is not None:
            recorder.add_samples(self.dir, clock)
        return self._outcome(snapshots, lateness, control, queue_counters, started_at)

    def _write_clock(self, lab: Lab) -> dict[str, int]:
        """`clock.json`: the run's time 0, the medium's model time 0 and the
        time 0 of the nodes' motion (scripted moves happen on its clock; the
        run's time 0, since the lab is held until then) on the wall clock
        (tcp_info samples, captures) and on CLOCK_MONOTONIC (routing daemons'
        events), so artefacts can be put on one time axis."""
        before_wall, before_mono = time.time_ns(), time.monotonic_ns()
        model_ns = lab.status()["time_ns"]
        after_wall, after_mono = time.time_ns(), time.monotonic_ns()
        run_t0_mono_ns = int(self.t0_mono * NS)
        clock = {"run_t0_wall_ns": self.t0_wall_ns, "run_t0_mono_ns": run_t0_mono_ns,
                 "model_t0_wall_ns": (before_wall + after_wall) // 2 - model_ns,
                 "model_t0_mono_ns": (before_mono + after_mono) // 2 - model_ns,
                 "motion_t0_wall_ns": self.t0_wall_ns, "motion_t0_mono_ns": run_t0_mono_ns}
        (self.dir / "clock.json").write_text(json.dumps(clock))
        return clock

    def _schedule(self) -> list[tuple[int, str, Flow | None]]:
        """(run time ns, action, flow), in order; snapshots come first at equal
        times. The window's edges are `edge` snapshots, the others (every
        `stats_interval`) `snapshot`."""
        run = self.run
        events: list[tuple[int, int, str, Flow | None]] = [(run.warmup_ns, 0, "edge", None)]
        interval = run.measure.get("stats_interval")
        if interval:
            events += [(t, 0, "snapshot", None) for t in range(interval, run.duration_ns, interval) if t != run.warmup_ns]
        for flow in run.flows:
            events.append((flow.start_ns - self._lead_ns(flow), 1, "start", flow))
            if flow.kind == "command" and flow.options["stop_given"]:
                events.append((flow.stop_ns, 1, "stop", flow))
        events.append((run.duration_ns, 2, "edge", None))
        return [(when, action, flow) for when, _, action, flow in sorted(events, key=lambda e: (e[0], e[1]))]

    @staticmethod
    def _lead_ns(flow: Flow) -> int:
        """How long before its start a flow's client is started: a
        meshemu-udp sender waits for its first packet's time itself, so the
        time it takes to start a program in a node (`ip netns exec`, once
        0.38 s in a CI run) does not shift the flow."""
        if flow.kind == "udp" and flow.options["tool"] == "meshemu-udp":
            return min(SENDER_LEAD_NS, flow.start_ns)
        return 0

    def _record_processes(self) -> None:
        table = [{"flow": s.flow.name, "role": s.role, "node": s.process.node, "argv": s.process.argv,
                  "returncode": s.process.poll()} for s in self.started]
        (self.dir / "processes.json").write_text(json.dumps(table, indent=1))

    # --- metrics ---

    def _failure(self, started: Started) -> str | None:
        code = started.process.poll()
        if started.role in ("probe", "capture", "command", "sink"):
            return None
        name = f"{started.role} of flow {started.flow.name} ({started.process.argv[0]})"
        if started.stopped:
            # A server still waiting at the very end has delivered its data; a client has not. A TCP
            # client still sending (starved, or its connection set up late, as under backpressure) is
            # measured all the same by its tcp_info samples (client_finished: false).
            if started.role == "server" or (started.role == "client" and started.flow.kind == "tcp"):
                return None
            return f"{name} did not finish {CLIENT_GRACE_S:.0f} s after its stop"
        if code == 0:
            return None
        detail = started.stderr.read_text(errors="replace").strip().splitlines()[-1:] or ["no error output"]
        return f"{name} exited with {code}: {detail[0]}"

    def _outcome(self, snapshots: list[dict[str, Any]], lateness: dict[str, Any] | None,
                 control: dict[str, Any] | None, queue_counters: dict[str, Any] | None,
                 started_at: float) -> Outcome:
        run = self.run
        failures = [text for text in (self._failure(s) for s in self.started) if text]
        if failures:
            raise RunFailed("; ".join(failures))
        edges = [snapshot for snapshot in snapshots if snapshot.get("window_edge")]
        if len(edges) != 2:
            raise RunFailed("the counters were not read at warm-up end and at the end")
        (self.dir / "stats.jsonl").write_text("".join(json.dumps(s) + "\n" for s in snapshots))
        warm, end = edges
        seconds = (run.duration_ns - run.warmup_ns) / NS
        flows = [self._flow_metrics(flow) for flow in run.flows]
        errors = [f"flow {flow['name']}: {flow['error']}" for flow in flows if "error" in flow]
        if errors:
            raise RunFailed("; ".join(errors))
        result: dict[str, Any] = {
            "flows": flows,
            "medium": metrics.medium_metrics(warm["nodes"], end["nodes"], seconds),
            "kernel": kernelstats.metrics(warm["kernel"], end["kernel"]),
        }
        delivered = metrics.delivered_data_packets(flows)
        result["routing"] = None if control is None else {
            **control, "normalized_overhead": control["control_packets"] / delivered if delivered else None,
        }
        if queue_counters is not None:
            result["queueing"] = self._queueing_metrics(flows, queue_counters)
        if run.measure["sim_reference"]:
            self._add_sim_reference(flows)
        clean = {key: value for key, value in (lateness or {}).items() if key != "ok"}
        return Outcome(result, clean or None, metrics.behind_real_time(lateness), started_at,
                       time.time() - started_at, {"runner_cpu_s": self.cpu.seconds})

    def _flow_metrics(self, flow: Flow) -> dict[str, Any]:
        base = flow.record()
        start, end = self._window_ns(flow)
        base["window_s"] = (end - start) / NS
        if flow.dst is not None:
            base.update(self._route_metrics(flow))
        path = self.dir / flow.name
        if flow.kind == "command":
            code = next((s.process.poll() for s in self.started if s.flow is flow), None)
            return {**base, "returncode": code}
        if flow.kind == "tcp":
            assert flow.port is not None
            samples = metrics.read_jsonl(Path(f"{path}.tcpinfo.jsonl"))
            found = metrics.tcp_metrics(samples, flow.port, (start, end))
            found["received_bytes"] = metrics.iperf3_received_bytes(metrics.read_json(Path(f"{path}.server.json")))
            found["client_finished"] = not any(s.stopped for s in self.started if s.flow is flow and s.role == "client")
            if self.run.measure["capture"] and flow.src is not None:
                events = pcap.tcp_events(Path(f"{path}.pcap"), self._ip(flow.src), flow.port)
                Path(f"{path}.events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
                found["captured_segments"] = len(events)
            return {**base, **found}
        if flow.kind == "udp" and flow.options["tool"] == "iperf3":
            offset = flow.start_ns
            window_s = ((start - self.t0_wall_ns - offset) / NS, (end - self.t0_wall_ns - offset) / NS)
            return {**base, "offered_bps": flow.options["rate_bps"],
                    **metrics.iperf3_udp_metrics(metrics.read_json(Path(f"{path}.server.json")), window_s)}
        if flow.kind == "udp":
            sender = metrics.read_jsonl(Path(f"{path}.send.json"))
            return {**base, **metrics.meshemu_udp_metrics(metrics.read_jsonl(Path(f"{path}.recv.jsonl")),
                                                          sender[-1] if sender else None)}
        sender = metrics.read_jsonl(Path(f"{path}.send.json"))
        window_s = ((start - self.t0_wall_ns - flow.start_ns) / NS, (end - self.t0_wall_ns - flow.start_ns) / NS)
        return {**base, **metrics.tfrc_metrics(metrics.read_jsonl(Path(f"{path}.recv.jsonl")),
                                               sender[-1] if sender else None,
                                               metrics.read_jsonl(Path(f"{path}.trace.jsonl")), window_s)}

    def _route_metrics(self, flow: Flow) -> dict[str, Any]:
        """The source's route to the destination over the flow's window, from
        its routing daemon's events (nothing without such events)."""
        assert flow.src is not None and flow.dst is not None
        events = metrics.read_jsonl(self.dir / ROUTING_DIR / f"{flow.src}.{Aodv.events}")
        if not events:
            return {}
        mono_start = int(self.t0_mono * NS) + max(self.run.warmup_ns, flow.start_ns)
        mono_end = int(self.t0_mono * NS) + flow.stop_ns
        return metrics.route_metrics(events, self._ip(flow.dst), (mono_start, mono_end))

    def _queueing_metrics(self, flows: list[dict[str, Any]], per_node: dict[str, Any]) -> dict[str, Any]:
        """bpd's counters summed per bpd flow (queueing.summary); each traffic
        flow gets its class's counters at its source (`released` there is
        what the source injected into the network)."""
        (self.dir / QUEUEING_FILE).write_text(json.dumps(per_node))
        choice = self.run.topology.queueing
        for record in flows:
            if record["kind"] != "command":
                record["queueing"] = queueing.source_counters(choice, per_node, record["src"], self._ip(record["src"]),
                                                              self._ip(record["dst"]))
        return queueing.summary(choice, per_node)

    def _ip(self, node: str) -> str:
        return str(self.run.topology.node(node).ipv4)

    def _add_sim_reference(self, flows: list[dict[str, Any]]) -> None:
        """The same UDP flows through the sim driver (virtual time, same
        medium; sim/scenario.py): constant bit rate at the same IP packet
        size and offered load and static minimum-hop routes (whatever routes
        the lab's), with the run's seed and the `sim_seeds - 1` after it. One
        lab run is one sample of a random process, so it is set beside the
        sim's mean over seeds (and their range), not beside one sim sample."""
        run = self.run
        udp_flows = sim_scenario.udp_flows(run)
        if not udp_flows:
            return
        seeds = [run.topology.medium["seed"] + k for k in range(run.measure["sim_seeds"])]
        outputs = [medium.sim(sim_scenario.scenario(run, seed)) for seed in seeds]
        (self.dir / "sim.json").write_text(json.dumps({"seeds": seeds, "outputs": outputs}))
        for index, flow in enumerate(udp_flows):
            record = next(row for row in flows if row["name"] == flow.name)
            goodputs = [sim_scenario.udp_metrics(run, flow, output["flows"][index])["goodput_bps"]
                        for output in outputs]
            mean = statistics.fmean(goodputs)
            record.update({"sim_seeds": seeds, "sim_goodput_bps": mean, "sim_goodput_min_bps": min(goodputs),
                           "sim_goodput_max_bps": max(goodputs),
                           "sim_ratio": record["goodput_bps"] / mean if mean else None})


def set_quickack(node: Node, ip: str) -> None:
    """Delayed ACKs "off": Linux has no switch for it, but a route with
    `quickack 1` makes the receiver acknowledge every segment at once. Every
    route of the node's main table gets it, realms kept (routes a routing
    daemon adds are its own to mark: plan.py asks aodvd to)."""
    routes = json.loads(node.run([ip, "-j", "route", "show"], timeout=10, check=True).stdout or "[]")
    for route in routes:
        argv = [ip, "route", "replace", route["dst"]]
        if "gateway" in route:
            argv += ["via", route["gateway"]]
        if "dev" in route:
            argv += ["dev", route["dev"]]
        for key, word in (("protocol", "proto"), ("scope", "scope"), ("prefsrc", "src"), ("metric", "metric")):
            if key in route:
                argv += [word, str(route[key])]
        if "onlink" in route.get("flags", []):
            argv.append("onlink")
        if "to" in route.get("flow", {}):  # the realm (`ip -j` writes it as flow.to)
            argv += ["realm", str(route["flow"]["to"])]
        node.run(argv + ["quickack", "1"], timeout=10, check=True)
