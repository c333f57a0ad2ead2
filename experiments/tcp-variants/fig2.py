"""Fig. 2 of the TCP-variants paper from a run of route-repair.yaml, and the
timeline of the break and its repair.

    python experiments/tcp-variants/fig2.py RESULTS_DIR [--run RUN_ID] [--out DIR]

Reads the run's artefacts (runs/<id>/): the sender's capture events
(`<flow>.events.jsonl`), its tcp_info samples, every node's AODV events
(`routing/<node>.aodv-events.jsonl`) and `clock.json`; puts them on the
scenario's clock (the nodes' motion: e starts moving at 30 s; the run's
time 0 since 2026-11-28, before that the medium's model time 0) and writes

- `fig2a.png`: data segments sent (marks at the top) and, per ACK the sender
  received, how many segments it newly acknowledged (0 = duplicate ACK), with
  the disconnection period (d detects the loss .. a has the new route) between
  solid lines and the time without new ACKs shaded;
- `fig2b.png`: SRTT and cwnd over time;
- `timeline.json`, and the timeline as a Markdown table on stdout.

The moment e leaves d's receive range comes from the run's own medium: the
receive range is found with `meshemu-medium links` on two static nodes, and
e's scripted move gives the time it reaches that distance from d.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only
import matplotlib.pyplot as plt  # noqa: E402

from meshemu import medium  # noqa: E402
from meshemu.choices import Aodv  # noqa: E402
from meshemu.experiment.metrics import data_socket, read_json, read_jsonl, rto_times  # noqa: E402
from meshemu.experiment.results import ResultsDir  # noqa: E402

NS = 1_000_000_000
SOURCE, DESTINATION, UPSTREAM, NEWCOMER = "a", "e", "d", "f"
ACK_CAP = 8  # segments per ACK drawn to scale; larger ones sit at the cap


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="results directory of route-repair.yaml")
    parser.add_argument("--run", help="run id (default: the last recorded run)")
    parser.add_argument("--out", type=Path, help="where the figures go (default: RESULTS/report)")
    args = parser.parse_args(argv)
    results = ResultsDir(args.results)
    records = results.records()
    if not records:
        print(f"no recorded runs in {results.runs_file}", file=sys.stderr)
        return 1
    record = next((r for r in records if r["run_id"] == args.run), None) if args.run else records[-1]
    if record is None:
        print(f"no run {args.run} in {results.runs_file}", file=sys.stderr)
        return 1
    out = args.out or args.results / "report"
    out.mkdir(parents=True, exist_ok=True)
    try:
        trace = RepairTrace(record, results.artefacts(record["run_id"]))
    except (FileNotFoundError, KeyError, ValueError) as exc:
        print(f"run {record['run_id']}: {exc}", file=sys.stderr)
        return 1
    timeline = trace.timeline()
    (out / "timeline.json").write_text(json.dumps(timeline, indent=1))
    print(markdown_timeline(timeline))
    trace.plot_acks(out / "fig2a.png", timeline)
    trace.plot_srtt_cwnd(out / "fig2b.png", timeline)
    print(f"\nfigures: {out / 'fig2a.png'}, {out / 'fig2b.png'}")
    return 0


class RepairTrace:
    """One run of route-repair.yaml on the scenario's time axis (seconds)."""

    def __init__(self, record: dict[str, Any], artefacts: Path):
        self.record = record
        self.dir = artefacts
        clock = read_json(artefacts / "clock.json")
        if clock is None:
            raise FileNotFoundError(f"{artefacts / 'clock.json'} is missing (a run from before it was recorded?)")
        # Runs from before the lab was held until time 0 moved from model time 0.
        self.motion_t0_wall = clock.get("motion_t0_wall_ns", clock["model_t0_wall_ns"])
        self.motion_t0_mono = clock.get("motion_t0_mono_ns", clock["model_t0_mono_ns"])
        config = record["config"]
        self.ip = {node["name"]: node["ipv4"] for node in config["nodes"]}
        self.medium = config["medium"]
        self.flow = next(flow for flow in config["traffic"] if flow["kind"] == "tcp")
        samples = read_jsonl(artefacts / f"{self.flow['name']}.tcpinfo.jsonl")
        self.samples = sorted(data_socket(samples, self.flow["port"]), key=lambda s: s["time_ns"])
        if not self.samples:
            raise ValueError("no tcp_info samples of the data connection")
        self.data_port = self.samples[0]["sport"]
        events = read_jsonl(artefacts / f"{self.flow['name']}.events.jsonl")
        self.sent = [e for e in events if e["kind"] == "data" and e["sport"] == self.data_port]
        self.acks = [e for e in events if e["kind"] == "ack" and e["dport"] == self.data_port]
        if not self.sent:
            raise ValueError("no captured data segments (measure: {capture: true})")

    def wall_s(self, wall_ns: int) -> float:
        return (wall_ns - self.motion_t0_wall) / NS

    def mono_s(self, mono_ns: int) -> float:
        return (mono_ns - self.motion_t0_mono) / NS

    def node_events(self, node: str, kind: str, **match: Any) -> list[tuple[float, dict[str, Any]]]:
        """(scenario time, event) of a node's AODV events of one kind whose fields match."""
        path = self.dir / "routing" / f"{node}.{Aodv.events}"
        return [(self.mono_s(e["mono_ns"]), e) for e in read_jsonl(path)
                if e["event"] == kind and all(e.get(k) == v for k, v in match.items())]

    def routing_events(self, node: str, kind: str, **match: Any) -> list[float]:
        return [t for t, _ in self.node_events(node, kind, **match)]

    # --- what happened when ---

    def break_time_s(self) -> float:
        """When the destination leaves the upstream node's receive range."""
        names = [node["name"] for node in self.medium["nodes"]]
        upstream = self.medium["nodes"][names.index(UPSTREAM)]
        reach = receive_range_m(self.medium, names.index(UPSTREAM), names.index(DESTINATION))
        mover = self.medium["nodes"][names.index(DESTINATION)]
        return leaves_range_s(mover, upstream["position"], reach)

    def timeline(self) -> dict[str, Any]:
        dst_ip = self.ip[DESTINATION]
        broken = self.break_time_s()
        detected = [t for t in self.routing_events(UPSTREAM, "link_broken", neighbor=dst_ip) if t >= broken - 1]
        if not detected:
            raise ValueError(f"{UPSTREAM} never lost its link to {DESTINATION}")
        detect = detected[0]

        def first(times: list[float]) -> float | None:
            """The first of the times at or after the detection."""
            return next((t for t in sorted(times) if t >= detect), None)

        repaired = first(self.routing_events(SOURCE, "discovery_succeeded", dst=dst_ip))
        new_acks = [self.wall_s(e["time_ns"]) for e, new in zip(self.acks, self.newly_acked()) if new > 0]
        last_ack_before = max((t for t in new_acks if t <= detect), default=None)
        first_ack_after = next((t for t in new_acks if repaired is not None and t >= repaired), None)
        cause = [e["cause"] for t, e in self.node_events(UPSTREAM, "link_broken", neighbor=dst_ip) if t == detect]
        repairs = [e["hops"] for t, e in self.node_events(SOURCE, "discovery_succeeded", dst=dst_ip) if t == repaired]
        return {
            "run_id": self.record["run_id"],
            "lateness_p99_ms": (self.record.get("lateness") or {}).get("p99_ns", 0) / 1e6,
            "flow_start_s": self.wall_s(self.samples[0]["time_ns"]),
            "newcomer_arrives_s": arrival_s(self.medium, NEWCOMER),
            "out_of_range_s": broken,
            "last_new_ack_s": last_ack_before,
            "detected_s": detect,
            "detected_cause": cause[0] if cause else None,
            "rerr_sent_s": first(self.routing_events(UPSTREAM, "rerr_sent")),
            "rerr_at_source_s": first(self.routing_events(SOURCE, "rerr_received")),
            "rediscovery_started_s": first(self.routing_events(SOURCE, "discovery_started", dst=dst_ip)),
            "route_via_newcomer_s": first(self.routing_events(UPSTREAM, "route_added", dst=dst_ip,
                                                              next_hop=self.ip[NEWCOMER])),
            "repaired_s": repaired,
            "repaired_hops": repairs[0] if repairs else None,
            "first_new_ack_after_repair_s": first_ack_after,
            "rto_after_break_s": [self.wall_s(t) for t in rto_times(self.samples) if self.wall_s(t) >= broken],
        }

    def newly_acked(self) -> list[int]:
        """Per ACK: segments it acknowledged beyond the highest ACK before it."""
        segment = most_common([e["len"] for e in self.sent]) or 1
        highest = 0
        counts = []
        for ack in self.acks:
            counts.append(max(0, round((ack["ack"] - highest) / segment)))
            highest = max(highest, ack["ack"])
        return counts

    # --- figures ---

    def _mark_periods(self, axes: Any, timeline: dict[str, Any]) -> None:
        if timeline["last_new_ack_s"] is not None and timeline["first_new_ack_after_repair_s"] is not None:
            axes.axvspan(timeline["last_new_ack_s"], timeline["first_new_ack_after_repair_s"], color="0.88",
                         label="no new ACKs")
        axes.axvline(timeline["out_of_range_s"], color="black", linestyle=":", linewidth=1, label=f"{DESTINATION} out of {UPSTREAM}'s range")
        for key in ("detected_s", "repaired_s"):
            if timeline[key] is not None:
                axes.axvline(timeline[key], color="black", linewidth=1.2)

    def plot_acks(self, path: Path, timeline: dict[str, Any]) -> None:
        """The whole transfer above, the break and repair ±5 s below. ACKs
        that acknowledge more than ACK_CAP segments are drawn at the cap (▲)."""
        counts = self.newly_acked()
        times = [self.wall_s(e["time_ns"]) for e in self.acks]
        sent = [self.wall_s(e["time_ns"]) for e in self.sent]
        low = [(t, c) for t, c in zip(times, counts) if c <= ACK_CAP]
        high = [t for t, c in zip(times, counts) if c > ACK_CAP]
        end = timeline["first_new_ack_after_repair_s"] or timeline["repaired_s"] or timeline["detected_s"]
        figure, panels = plt.subplots(2, 1, figsize=(7.5, 6))
        for axes, span in zip(panels, (None, (timeline["out_of_range_s"] - 5, end + 5))):
            self._mark_periods(axes, timeline)
            axes.plot([t for t, _ in low], [c for _, c in low], ".", color="black", markersize=3,
                      label="ACK: segments newly acknowledged")
            axes.plot(high, [ACK_CAP] * len(high), "^", color="black", markersize=3, label=f"ACK: more than {ACK_CAP}")
            axes.plot(sent, [ACK_CAP + 1.5] * len(sent), "|", color="0.35", markersize=6, label="data segment sent")
            axes.set_ylim(-0.5, ACK_CAP + 2.5)
            axes.set_ylabel("segments acknowledged")
            if span is not None:
                axes.set_xlim(*span)
        panels[1].set_xlabel("time (s)")
        panels[0].set_title("Fig. 2(a): ACKs and data segments at a; solid lines: d detects the break .. "
                            "a has the new route", fontsize=8)
        panels[0].legend(frameon=False, fontsize=7, loc="lower left", ncol=2, bbox_to_anchor=(0, 1.06))
        figure.savefig(path, dpi=150, bbox_inches="tight")
        plt.close(figure)

    def plot_srtt_cwnd(self, path: Path, timeline: dict[str, Any]) -> None:
        established = [s for s in self.samples if s["state"] == 1]
        times = [self.wall_s(s["time_ns"]) for s in established]
        figure, left = plt.subplots(figsize=(7.5, 3.8))
        self._mark_periods(left, timeline)
        left.plot(times, [s["srtt_us"] / 1e3 for s in established], color="black", label="SRTT")
        left.set_xlabel("time (s)")
        left.set_ylabel("SRTT (ms)")
        right = left.twinx()
        right.plot(times, [s["cwnd"] for s in established], color="0.5", linestyle="--", label="cwnd")
        right.set_ylabel("cwnd (segments)")
        for rto in timeline["rto_after_break_s"]:
            left.axvline(rto, color="0.4", linestyle="-.", linewidth=0.8)
        left.set_title("Fig. 2(b): SRTT and cwnd of the Reno sender (dash-dot: RTOs after the break)", fontsize=8)
        handles = left.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
        left.legend(handles=handles, frameon=False, fontsize=7, loc="upper right")
        figure.savefig(path, dpi=150, bbox_inches="tight")
        plt.close(figure)


def most_common(values: list[int]) -> int | None:
    return max(set(values), key=values.count) if values else None


def receive_range_m(medium_config: dict[str, Any], a: int, b: int) -> float:
    """The largest distance at which nodes a and b of the medium still hear
    each other both ways (bisection with `meshemu-medium links` on the two
    nodes alone, static, along the x axis)."""
    pair = [dict(medium_config["nodes"][a], mobility={"kind": "static"}, position=[0.0, 0.0, 0.0]),
            dict(medium_config["nodes"][b], mobility={"kind": "static"})]

    def hears(distance: float) -> bool:
        pair[1]["position"] = [distance, 0.0, 0.0]
        report = medium.links({**medium_config, "nodes": pair, "links": []})
        return sum(link["in_rx_range"] for link in report["links"]) == 2

    near, far = 1.0, 10_000.0
    if not hears(near) or hears(far):
        raise ValueError("cannot bracket the receive range between 1 m and 10 km")
    while far - near > 0.1:
        middle = (near + far) / 2
        near, far = (middle, far) if hears(middle) else (near, middle)
    return near


def leaves_range_s(mover: dict[str, Any], fixed: list[float], reach: float) -> float:
    """When a node moving by its `setdest` moves first gets farther than
    `reach` from `fixed` (straight moves at constant speed)."""
    position = list(mover["position"])
    mobility = mover["mobility"]
    if mobility["kind"] != "setdest":
        raise ValueError(f"{DESTINATION} does not move by setdest")
    time_s = 0.0
    for move in mobility["moves"]:
        time_s = max(time_s, move["t_ns"] / NS)
        target, speed = move["target"], move["speed_mps"]
        length = math.dist(position, target)
        steps = max(1, int(length / 0.01))
        for step in range(steps + 1):
            point = [p + (t - p) * step / steps for p, t in zip(position, target)]
            if math.dist(point, fixed) > reach:
                return time_s + length * step / steps / speed
        time_s += length / speed
        position = list(target)
    raise ValueError(f"{DESTINATION} never leaves the range")


def arrival_s(medium_config: dict[str, Any], name: str) -> float | None:
    """When a node with waypoints reaches its last point."""
    node = next(n for n in medium_config["nodes"] if n["name"] == name)
    points = node["mobility"].get("points") if node["mobility"]["kind"] == "waypoints" else None
    return points[-1]["t_ns"] / NS if points else None


def markdown_timeline(timeline: dict[str, Any]) -> str:
    rows = [
        ("f settles between d and e", "newcomer_arrives_s"),
        ("TCP connection's first sample", "flow_start_s"),
        ("e leaves d's receive range (geometry)", "out_of_range_s"),
        ("last new ACK at a before the detection", "last_new_ack_s"),
        (f"d declares the link to e broken ({timeline['detected_cause']})", "detected_s"),
        ("d sends the RERR", "rerr_sent_s"),
        ("the RERR reaches a", "rerr_at_source_s"),
        ("a starts the rediscovery", "rediscovery_started_s"),
        ("d installs the route to e via f", "route_via_newcomer_s"),
        (f"a has the new route ({timeline['repaired_hops']} hops)", "repaired_s"),
        ("first new ACK at a after the repair", "first_new_ack_after_repair_s"),
    ]
    lines = ["| event (scenario time) | s |", "|---|---|"]
    for text, key in rows:
        value = timeline[key]
        lines.append(f"| {text} | {'-' if value is None else f'{value:.2f}'} |")
    rtos = ", ".join(f"{t:.2f}" for t in timeline["rto_after_break_s"]) or "none"
    lines.append(f"| RTOs of the sender after the break | {rtos} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
