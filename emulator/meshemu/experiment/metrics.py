"""Metrics of a run from what its tools wrote (pure functions, no I/O but
reading the files handed to them).

Definitions (also in experiment/README.md):
- goodput: bytes delivered in order to the receiving application per second
  over the flow's measurement window [max(warmup, start), stop]. TCP: the
  sender's `tcpi_bytes_acked` (each byte acknowledged once, retransmissions
  excluded) sampled by meshemu-tcpprobe; UDP: payload bytes of the packets
  sent inside the window that arrived (meshemu-udp) or iperf3's received
  bytes in the intervals inside the window.
- throughput: TCP only, goodput plus the bytes retransmitted in the window
  (`tcpi_bytes_retrans`): what the path carried for the data acknowledged in
  the window, each retransmission counted again. It is `tcpi_bytes_sent`'s
  delta less the change of the bytes in flight between the window's edges:
  counted from bytes sent, a window that opens with a full congestion window
  in flight and closes with half of one would show less throughput than
  goodput (by cwnd/2 over the window: 13 % of a 4-s window at 2 hops).
  So throughput >= goodput always, and equal without retransmissions.
- MAC drop fraction: unicast frames dropped at the retry limit / unicast
  frames attempted (acknowledged + dropped), each frame counted once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

# The medium is behind real time when its actions run later than this
# (emulator/README.md §6, "lateness"): see the
# measured figures behind the bounds (experiment/README.md).
LATENESS_P99_BOUND_NS = 1_000_000
LATENESS_MAX_BOUND_NS = 10_000_000

# Counters that are levels, not totals: their value at the end is kept.
GAUGES = {"queue_len", "queue_len_max"}
HISTOGRAMS = {"rts_attempts_hist", "data_attempts_hist"}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """JSON objects, one per line; a torn last line (a killed writer) is skipped."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return []
    objects = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


def read_tail(path: Path, size: int = 8192) -> list[dict[str, Any]]:
    """The complete JSON lines among the last `size` bytes of a file that is
    still being written (live figures)."""
    try:
        with open(path, "rb") as file:
            file.seek(0, 2)
            length = file.tell()
            file.seek(max(0, length - size))
            text = file.read().decode(errors="replace")
    except FileNotFoundError:
        return []
    lines = text.splitlines()[1 if length > size else 0:]
    objects = []
    for line in lines:
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            objects.append(value)
    return objects


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        value = json.loads(path.read_text(errors="replace"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {"mean": sum(values) / len(values), "min": ordered[0], "max": ordered[-1],
            "p50": ordered[len(ordered) // 2]}


# --- TCP ----------------------------------------------------------------------------------

def data_socket(samples: list[dict[str, Any]], port: int) -> list[dict[str, Any]]:
    """The samples of the connection that carried the data: iperf3 opens a
    control connection to the same port, so the one that acknowledged most."""
    connections: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for sample in samples:
        if sample.get("dport") == port:
            connections.setdefault((sample["src"], sample["sport"]), []).append(sample)
    if not connections:
        return []
    return max(connections.values(), key=lambda rows: max(row["bytes_acked"] for row in rows))


def _at(samples: list[dict[str, Any]], time_ns: int, key: str) -> int:
    """The counter's value at `time_ns`: the last sample at or before it (0
    before the connection existed)."""
    value = 0
    for sample in samples:
        if sample["time_ns"] > time_ns:
            break
        value = sample[key]
    return value


def tcp_metrics(samples: list[dict[str, Any]], port: int, window: tuple[int, int]) -> dict[str, Any]:
    """Goodput, throughput, retransmissions and the RTT of the sender's data
    connection over the window (wall-clock ns)."""
    rows = sorted(data_socket(samples, port), key=lambda row: row["time_ns"])
    start, end = window
    seconds = (end - start) / 1e9
    if not rows:
        return {"error": "no tcp_info samples of the data connection (did it connect?)"}

    def delta(key: str) -> int:
        return _at(rows, end, key) - _at(rows, start, key)

    inside = [row for row in rows if start <= row["time_ns"] <= end]
    established = [row for row in inside if row["state"] == 1]
    srtt = [row["srtt_us"] / 1e3 for row in established]
    return {
        "goodput_bps": delta("bytes_acked") * 8 / seconds,
        "throughput_bps": (delta("bytes_acked") + delta("bytes_retrans")) * 8 / seconds,
        "bytes_acked": delta("bytes_acked"),
        "bytes_sent": delta("bytes_sent"),
        "bytes_retrans": delta("bytes_retrans"),
        "retransmits": delta("total_retrans"),
        "segments_out": delta("segs_out"),
        "mss": rows[-1]["mss"],
        "congestion": rows[-1].get("congestion"),
        "rtt_ms": _spread(srtt),
        "cwnd": _spread([float(row["cwnd"]) for row in established]),
        "rto_ms": _spread([row["rto_us"] / 1e3 for row in established]),
        "in_flight": _spread([float(row["unacked"]) for row in established if "unacked" in row]),
        "rto_events": sum(start <= t <= end for t in rto_times(rows)),
        "samples": len(inside),
    }


# tcp_info's ca_state of a connection after a retransmission timeout (TCP_CA_Loss).
CA_LOSS = 4


def rto_times(rows: list[dict[str, Any]]) -> list[int]:
    """When the sender's retransmission timer fired, from its tcp_info
    samples (ns): the connection enters the loss state, which Linux enters
    on a timeout, or, while in it, its RTO grows by half or more (every
    further timeout doubles it). A timeout and the recovery from it between
    two samples go unseen: sample faster than the minimum RTO (200 ms)."""
    times = []
    previous = None
    for row in rows:
        if row.get("ca_state") == CA_LOSS and previous is not None and (
                previous["ca_state"] != CA_LOSS or row["rto_us"] >= 1.5 * previous["rto_us"]):
            times.append(row["time_ns"])
        previous = row
    return times


def route_metrics(events: list[dict[str, Any]], dst_ip: str, window: tuple[int, int]) -> dict[str, Any]:
    """The source's route to `dst_ip` over the window (CLOCK_MONOTONIC ns)
    from its routing daemon's events (aodvd: route_added {dst, hops},
    route_removed {dst}): `path_hops`, the hop count averaged over the time a
    route existed; `route_fraction`, the share of the window with a route;
    `route_changes` (routes installed or changed) and `route_losses` (routes
    taken out) inside the window."""
    start, end = window
    hops: int | None = None
    since = start
    weighted = covered = changes = losses = 0
    ordered = sorted((e for e in events if e.get("dst") == dst_ip and e.get("event") in ("route_added", "route_removed")),
                     key=lambda e: e["mono_ns"])
    for event in ordered + [{"mono_ns": end, "event": "end"}]:
        at = min(max(event["mono_ns"], start), end)
        if hops is not None:
            weighted += hops * (at - since)
            covered += at - since
        since = at
        if event["event"] == "end":
            break
        inside = start <= event["mono_ns"] <= end
        if event["event"] == "route_added":
            hops = int(event["hops"])
            changes += inside
        else:
            hops = None
            losses += inside
    return {"path_hops": weighted / covered if covered else None,
            "route_fraction": covered / (end - start) if end > start else None,
            "route_changes": changes, "route_losses": losses}


def iperf3_received_bytes(server: dict[str, Any] | None) -> int | None:
    """What the iperf3 server received over the whole test."""
    if not server:
        return None
    end = server.get("end", {})
    for key in ("sum_received", "sum"):
        if isinstance(end.get(key), dict) and "bytes" in end[key]:
            return int(end[key]["bytes"])
    return None


# --- UDP ----------------------------------------------------------------------------------

def meshemu_udp_metrics(receiver: list[dict[str, Any]], sender: dict[str, Any] | None) -> dict[str, Any]:
    """From meshemu-udp's reports: the receiver's flow summary (packets sent
    in the window) and the sender's count of packets sent in the window."""
    flows = [line for line in receiver if line.get("type") == "flow"]
    if sender is None:
        return {"error": "the sender wrote no summary"}
    sent = int(sender["window_packets"])
    received = flows[0] if flows else {"packets": 0, "bytes": 0, "goodput_bps": 0.0, "delay": None,
                                       "jitter_ns": 0.0, "reordered": 0, "duplicates": 0}
    delay = received.get("delay")
    return {
        "goodput_bps": received["goodput_bps"],
        "offered_bps": sender["rate_bps"],
        "packets_sent": sent,
        "packets_received": received["packets"],
        "loss": 1 - received["packets"] / sent if sent else None,
        "send_errors": sender["send_errors"],
        "delay_ms": None if delay is None else {key[:-3]: value / 1e6 for key, value in delay.items()},
        "jitter_ms": received["jitter_ns"] / 1e6,
        "reordered": received["reordered"],
        "duplicates": received["duplicates"],
    }


def iperf3_udp_metrics(server: dict[str, Any] | None, window_s: tuple[float, float]) -> dict[str, Any]:
    """iperf3 -u, server side, over the intervals inside the window (seconds
    from the client's start): goodput, packets received, loss (lost / all
    the server accounted for) and jitter (the mean of the intervals')."""
    if not server or "intervals" not in server:
        return {"error": "iperf3 wrote no report" + (f": {server['error']}" if server and "error" in server else "")}
    start, end = window_s
    picked = [interval["sum"] for interval in server["intervals"]
              if interval["sum"]["start"] >= start - 1e-3 and interval["sum"]["end"] <= end + 0.5]
    seconds = sum(part["seconds"] for part in picked)
    packets = sum(part.get("packets", 0) for part in picked)
    lost = sum(part.get("lost_packets", 0) for part in picked)
    jitters = [part["jitter_ms"] for part in picked if part.get("jitter_ms") is not None]
    return {
        "goodput_bps": sum(part["bytes"] for part in picked) * 8 / seconds if seconds else 0.0,
        "packets_received": packets - lost,
        "loss": lost / packets if packets else None,
        "jitter_ms": sum(jitters) / len(jitters) if jitters else None,
        "intervals": len(picked),
    }


# --- TFRC ---------------------------------------------------------------------------------

def tfrc_metrics(receiver: list[dict[str, Any]], sender: dict[str, Any] | None, trace: list[dict[str, Any]],
                 window_s: tuple[float, float]) -> dict[str, Any]:
    """From the tfrc tool's outputs. Over the window (seconds from the
    sender's start; slow start's overshoot falls before it): goodput, sending
    rate and TFRC's allowed rate X (its value at the end of each report) as
    time-weighted means of the sender's 1-s interval reports; RTT samples and
    the mean loss event rate from the feedback lines of its trace. Over the
    whole flow (the receiver's summary): loss, jitter, one-way delay."""
    flows = [line for line in receiver if line.get("role") in (None, "receiver") and "packets" in line]
    if sender is None:
        return {"error": "the tfrc sender wrote no summary"}
    start, end = window_s
    intervals = [part for part in sender.get("intervals", [])
                 if part["start_s"] >= start - 1e-3 and part["end_s"] <= end + 1e-3]
    seconds = sum(part["end_s"] - part["start_s"] for part in intervals)
    if not seconds:
        return {"error": f"the tfrc sender reported no interval inside the window {start:g}-{end:g} s"}

    def mean_rate(key: str) -> float:
        return sum(part[key] * (part["end_s"] - part["start_s"]) for part in intervals) / seconds

    feedback = [row for row in trace if row.get("event") == "feedback" and start <= row["t"] <= end]
    flow = flows[0] if flows else {}
    return {
        "goodput_bps": mean_rate("throughput_bps"),
        "sending_rate_bps": mean_rate("sending_rate_bps"),
        "allowed_rate_bps": mean_rate("x_bps"),
        "rtt_ms": _spread([row["rtt_sample_ms"] for row in feedback]),
        "loss_event_rate": sum(row["p"] for row in feedback) / len(feedback) if feedback else None,
        "feedback": len(feedback),
        "packets_received": flow.get("packets"),
        "loss": flow.get("loss_fraction"),
        "jitter_ms": flow.get("jitter_ms"),
        "delay_ms": flow.get("one_way_delay_ms"),
    }


# --- the medium ---------------------------------------------------------------------------

def counter_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """One node's counters over an interval (gauges: the value at the end)."""
    delta: dict[str, Any] = {}
    for key, value in after.items():
        if key == "peers":
            continue
        if key in HISTOGRAMS:
            delta[key] = [late - early for late, early in zip(value, before.get(key, [0] * len(value)))]
        elif key in GAUGES:
            delta[key] = value
        elif isinstance(value, (int, float)):
            delta[key] = value - before.get(key, 0)
    return delta


def derived(counters: dict[str, Any], seconds: float) -> dict[str, Any]:
    frames = counters.get("tx_data_frames", 0) + counters.get("retry_drops", 0)
    return {
        "mac_drop_fraction": counters.get("retry_drops", 0) / frames if frames else 0.0,
        "backoffs_per_s": counters.get("backoffs", 0) / seconds,
        "busy_fraction": counters.get("busy_ns", 0) / (seconds * 1e9),
        "rts_per_frame": counters.get("rts_attempts", 0) / frames if frames else 0.0,
    }


def medium_metrics(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
                   seconds: float) -> dict[str, Any]:
    """Per node: counter deltas and derived figures; `total`: the sums (busy
    fraction: the mean over nodes)."""
    nodes = {}
    for name, counters in after.items():
        delta = counter_delta(before.get(name, {}), counters)
        nodes[name] = {**delta, **derived(delta, seconds)}
    total: dict[str, Any] = {}
    for delta in nodes.values():
        for key, value in delta.items():
            if key in HISTOGRAMS:
                total[key] = [a + b for a, b in zip(total.get(key, [0] * len(value)), value)]
            elif key not in GAUGES and not key.endswith(("_fraction", "_per_s", "_per_frame")):
                total[key] = total.get(key, 0) + value
    total.update(derived(total, seconds))
    total["busy_fraction"] = sum(node["busy_fraction"] for node in nodes.values()) / max(1, len(nodes))
    total["queue_len_max"] = max((node.get("queue_len_max", 0) for node in nodes.values()), default=0)
    return {"nodes": nodes, "total": total}


def behind_real_time(lateness: dict[str, Any] | None) -> bool:
    if not lateness or not lateness.get("count"):
        return False
    return lateness["p99_ns"] > LATENESS_P99_BOUND_NS or lateness["max_ns"] > LATENESS_MAX_BOUND_NS


def delivered_data_packets(flows: Iterable[dict[str, Any]]) -> int:
    """Data packets delivered end to end (for the normalized routing overhead):
    datagrams received, TCP bytes acknowledged / MSS."""
    total = 0
    for flow in flows:
        if flow.get("packets_received"):
            total += int(flow["packets_received"])
        elif flow.get("bytes_acked") and flow.get("mss"):
            total += int(flow["bytes_acked"] // flow["mss"])
    return total
