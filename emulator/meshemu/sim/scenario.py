"""A planned run's UDP flows -> the scenario of `meshemu-medium sim`
(emulator/README.md section 3), and the sim's figures of a flow -> the
lab's metric names. Used by the sim driver (every flow of the run) and by a
lab run's `measure.sim_reference` (its UDP flows).

Each UDP flow becomes a constant-bit-rate flow of the lab's IP packets (UDP
payload + 28 B of UDP and IP headers) at the lab's packet rate, from the
flow's start to its stop; the medium is the run's, its seed the run's (or
another, for the reference's further seeds); routes are static, minimum hops
at time 0. As in a lab, every node's counters are read at the warm-up's end
and at the run's end (`snapshots_ns`), and the run goes on for `drain`
after it, so that packets in flight arrive.

A flow is measured as the lab's tool measures it (experiment/README.md,
"The sim driver"): meshemu-udp counts the packets sent in the lab's window
[max(warmup, start), stop] that arrived by the drain's end (the sim's
`generated`, a flow creating packets only between its start and stop, and
`generated_delivered`); iperf3 counts the packets that arrived in the
window [warmup, duration], whenever sent (the sim's `delivered`, with
`window_end_ns` the run's duration). On a saturated long chain the two
differ by the queue the drain leaves undelivered. Only the one-way delays
are the sim's own: those of the packets delivered in the window, whenever
created.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..experiment.runs import Flow, Run

# UDP and IPv4 headers around a UDP payload: the IP packet the medium carries.
UDP_IP_HEADERS = 8 + 20
NS = 1_000_000_000


def udp_flows(run: "Run") -> list["Flow"]:
    return [flow for flow in run.flows if flow.kind == "udp"]


def scenario(run: "Run", seed: int | None = None) -> dict[str, Any]:
    """The sim scenario of the run's UDP flows, with the run's seed unless
    another is given."""
    names = [node.name for node in run.topology.nodes]
    flows = []
    for flow in udp_flows(run):
        assert flow.src is not None and flow.dst is not None
        payload = flow.options["packet"]
        ip_bytes = payload + UDP_IP_HEADERS
        flows.append({"name": flow.name, "src": names.index(flow.src), "dst": names.index(flow.dst),
                      "packet_bytes": ip_bytes,
                      # The lab's packet rate: its rate counts UDP payload.
                      "traffic": {"kind": "cbr", "rate_bps": math.ceil(flow.options["rate_bps"] * ip_bytes / payload)},
                      "start_ns": flow.start_ns, "stop_ns": flow.stop_ns})
    medium = run.topology.medium if seed is None else {**run.topology.medium, "seed": seed}
    return {"medium": medium, "duration_ns": run.duration_ns + run.measure["drain"], "warmup_ns": run.warmup_ns,
            "window_end_ns": run.duration_ns, "routing": "static", "flows": flows, "snapshots_ns": [run.warmup_ns, run.duration_ns], "trace": False}


def window_s(run: "Run", flow: "Flow") -> float:
    """The flow's measurement window [max(warmup, start), stop], seconds."""
    return (flow.stop_ns - max(run.warmup_ns, flow.start_ns)) / NS


def udp_metrics(run: "Run", flow: "Flow", figures: dict[str, Any]) -> dict[str, Any]:
    """The lab's UDP metrics from the sim's figures of the flow (its entry in
    the output's `flows`): goodput counts the UDP payload of the packets the
    flow's tool counts (above), over the window; loss is the share of the
    packets sent in the window that never arrived."""
    created, arrived = figures["generated"], figures["generated_delivered"]
    counted = figures["delivered"] if flow.options["tool"] == "iperf3" else arrived
    delay = figures["delay_ns"]
    return {
        "goodput_bps": counted * flow.options["packet"] * 8 / window_s(run, flow),
        "offered_bps": flow.options["rate_bps"],
        "packets_sent": created,
        "packets_received": counted,
        "loss": 1 - arrived / created if created else None,
        # The sim's delay summary is zeros when nothing arrived.
        "delay_ms": {key: delay[key] / 1e6 for key in ("mean", "p50", "p95", "max")} if figures["delivered"]
        else None,
        "source_queue_drops": figures["source_queue_drops"],
        # Static routes: every packet delivered took the same path.
        "route_length": float(figures["hops"]) if counted else None,
    }
