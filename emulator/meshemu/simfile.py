"""Sim files: virtual-time runs of the model with synthetic traffic.

A sim file names a topology (inline or `{file: ...}`), flows, a duration,
seeds and an optional sweep. It expands into runs — the cartesian product of
the sweep values, each with every seed — and each run resolves to the
scenario of emulator/README.md section 3, run by `meshemu-medium sim -`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Callable, Literal

from pydantic import Field, ValidationError, model_validator

from . import medium
from .errors import ConfigError, MediumError, Problem
from .schema import Duration, PositiveRate, PositiveSize, RunFileSpec, StrictModel
from .source import DataPath, Document, load_yaml, pydantic_problems
from .sweep import expand, inline_topology_file, seeds_of, sweep_paths
from .topology import Topology, resolve_mac, resolve_topology

# The largest 802.11 MSDU: the model does not fragment.
MAX_PACKET_BYTES = 2304


class FlowSpec(StrictModel):
    src: str
    dst: str
    traffic: Literal["saturated", "cbr", "poisson"]
    packet: PositiveSize
    rate: PositiveRate | None = None
    start: Duration = 0
    stop: Duration | None = None

    @model_validator(mode="after")
    def _consistent(self) -> "FlowSpec":
        if self.traffic == "saturated" and self.rate is not None:
            raise ValueError("a saturated flow has no rate (it always has a packet to send)")
        if self.traffic != "saturated" and self.rate is None:
            raise ValueError(f"{self.traffic} traffic needs a rate, such as rate: 1Mbps")
        if self.packet > MAX_PACKET_BYTES:
            raise ValueError(f"packet {self.packet} B is larger than the 802.11 maximum of {MAX_PACKET_BYTES} B")
        if self.stop is not None and self.stop <= self.start:
            raise ValueError("stop must be after start")
        return self


class SimSpec(RunFileSpec):
    flows: Annotated[list[FlowSpec], Field(min_length=1)]
    trace: bool = False


@dataclass(frozen=True)
class SimRun:
    params: dict[str, Any]  # sweep path -> the value as written
    choices: dict[str, int]  # sweep path -> index of that value in the sweep list
    seed: int
    topology: Topology
    scenario: dict[str, Any]


@dataclass(frozen=True)
class SimPlan:
    file: str
    description: str | None
    sweep_paths: list[str]
    flow_names: list[str]  # of the first run (sweeps may change the count)
    runs: list[SimRun]


def is_sim_file(document: Document) -> bool:
    return isinstance(document.data, dict) and "flows" in document.data


def load_sim(path: str | Path) -> SimPlan:
    return plan_sim(load_yaml(path))


def plan_sim(document: Document) -> SimPlan:
    """Validate every run of the sim file (every sweep point, every seed)
    before anything runs; all problems are reported at once."""
    if not isinstance(document.data, dict):
        raise document.error((), "expected a mapping (a sim file)")
    inline_topology_file(document)
    problems: list[Problem] = []
    runs: list[SimRun] = []
    for point in expand(document):
        if isinstance(point, list):
            problems.extend(point)
            continue
        try:
            runs.extend(_runs_of(point.document, point.params, point.choices))
        except ConfigError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    description = document.data.get("description")
    return SimPlan(document.file, description if isinstance(description, str) else None,
                   sweep_paths(document), [flow["name"] for flow in runs[0].scenario["flows"]], runs)


def _runs_of(document: Document, params: dict[str, Any], choices: dict[str, int]) -> list[SimRun]:
    try:
        spec = SimSpec.model_validate(document.data)
    except ValidationError as exc:
        raise ConfigError(pydantic_problems(document, exc.errors(), (), StrictModel.known_keys())) from None
    seeds = seeds_of(spec.seeds, spec.seed, document, spec.repetitions)
    mac = resolve_mac(spec.mac) if spec.mac is not None else None
    runs = []
    for seed in seeds:
        topology = resolve_topology(document, ("topology",), seed=seed, mac=mac)
        if topology.routing_choice.name != "static":
            where = ("ns-2: use an experiment file and meshemu run --driver ns2"
                     if topology.routing_choice.kind.ns2_only else
                     "labs: use an experiment file and meshemu run")
            raise document.error(("topology", "routing"), f"the sim driver routes statically (minimum hops at "
                                 f"time 0); routing {topology.routing_choice.name} runs only in {where}")
        flows = _flows(document, spec, topology)
        scenario = {
            "medium": topology.medium,
            "duration_ns": spec.duration,
            "warmup_ns": spec.warmup,
            "routing": topology.lab_routing,
            "flows": flows,
            "trace": spec.trace,
        }
        runs.append(SimRun(params, choices, seed, topology, scenario))
    return runs


def _flows(document: Document, spec: SimSpec, topology: Topology) -> list[dict[str, Any]]:
    names = [node.name for node in topology.nodes]
    problems: list[Problem] = []

    def node_index(value: str, path: DataPath) -> int | None:
        if value == "first":
            return 0
        if value == "last":
            return len(names) - 1
        if value in names:
            return names.index(value)
        problems.append(document.problem(path, f"unknown node {value!r} (use a node name, first or last)"))
        return None

    flows = []
    for number, flow in enumerate(spec.flows):
        path: DataPath = ("flows", number)
        dst: int | str | None = "broadcast" if flow.dst == "broadcast" else node_index(flow.dst, path + ("dst",))
        if flow.src == "all":
            sources: list[int | None] = [i for i in range(len(names)) if i != dst]
        elif flow.src == "broadcast":
            problems.append(document.problem(path + ("src",), "broadcast is a destination, not a source"))
            continue
        else:
            sources = [node_index(flow.src, path + ("src",))]
        if dst is None or None in sources:
            continue
        if sources == [dst]:
            problems.append(document.problem(path, f"src and dst are the same node ({names[dst]})"))
            continue
        if flow.start >= spec.duration:
            problems.append(document.problem(path + ("start",), "the flow starts after the run ends"))
        traffic: dict[str, Any] = {"kind": flow.traffic}
        if flow.rate is not None:
            traffic["rate_bps"] = flow.rate
        for src in sources:
            flows.append({"name": f"f{len(flows)}", "src": src, "dst": dst, "packet_bytes": flow.packet,
                          "traffic": traffic, "start_ns": flow.start, "stop_ns": flow.stop})
    if problems:
        raise ConfigError(problems)
    return flows


# --- running --------------------------------------------------------------------------

@dataclass(frozen=True)
class SimResult:
    run: SimRun
    output: dict[str, Any] | None  # the medium's output
    error: str | None

    def as_json(self) -> dict[str, Any]:
        """The medium's output plus the swept values and the seed."""
        return {**(self.output or {"error": self.error}), "params": self.run.params, "seed": self.run.seed}


def run_plan(plan: SimPlan, jobs: int, on_done: Callable[[SimResult], None] | None = None,
             simulate: Callable[[dict[str, Any]], dict[str, Any]] = medium.sim) -> list[SimResult]:
    """Run every run of the plan, `jobs` at a time; results in plan order.
    A failed run is reported in its result and does not stop the others."""

    def one(run: SimRun) -> SimResult:
        try:
            result = SimResult(run, simulate(run.scenario), None)
        except MediumError as exc:
            result = SimResult(run, None, str(exc))
        if on_done is not None:
            on_done(result)
        return result

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, plan.runs))
