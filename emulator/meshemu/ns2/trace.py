"""ns-2's trace and the scenario's samples -> the lab's metrics.

The trace (old wireless format, cmu-trace.cc) is read line by line as ns-2
wrote it, never whole: a 150-s run of a 169-node grid writes gigabytes.

    s 1.026166934 _0_ MAC  --- 0 cbr 1538 [13a 1 0 800] ------- [0:0 3:0 30 1] [0] 0 0
    event time _node_ level reason uid type size [MAC: duration dst src type] ------- [IP: src:port dst:port ttl next] ...

Metrics, with the lab's names where they mean the same (experiment/README.md):
- per flow, over its window [max(warmup, start), stop]: UDP from the agents'
  send and receive events (AGT, matched by packet uid): packets sent in the
  window, those of them received (goodput counts their UDP payload), loss,
  one-way delay, RFC 3550 jitter, reordering, duplicates; `sink_packets`,
  what the LossMonitor counted arriving in the window. TCP from the sender
  agent's variables sampled at the window's edges (and every
  measure.tcp_trace in between): goodput from its highest cumulative ACK
  (ack_, in segments of packetSize_ bytes), throughput (goodput plus the
  bytes retransmitted), bytes sent, retransmissions, timeouts (nrexmit_),
  cwnd, smoothed RTT, segments in flight. Both: `route_length`, the mean
  number of hops (MAC receptions, num_forwards) of the data packets
  delivered in the window.
- per node, over [warmup, duration] (metrics.medium): tx_data_frames
  (unicast frames acknowledged: ACKs received, `r MAC ACK`), data_attempts
  (unicast data frames sent, retries included), tx_broadcast_frames,
  rts_attempts, cts_sent, acks_sent, retry_drops (`D MAC RET` of the data
  frame, once per frame: at the short retry limit ns-2 logs the RTS too,
  and that line is `mac_ret_rts` below), retry_drops_by_packet (the same
  by the packet's type: cbr, tcp, ack, AODV, ARP, ...), queue_drops
  (`D IFQ ---`: the interface queue was full), rx_frames (data frames
  delivered up), rx_duplicates (`D MAC DUP`); mac_drop_fraction and
  rts_per_frame as the lab derives them. ns-2's drop lines by layer and
  reason in `ns2_drops` (`mac_ret`: retry_drops; `mac_ret_rts`: the RTS
  line of a frame dropped at the short retry limit, i.e. the frames of
  retry_drops that failed for want of a CTS; `mac_col`: frames for this node lost to a collision, which
  ns-2 logs only for frames it could have decoded, so not the lab's
  rx_collisions; `mac_bsy`: frames discarded because the MAC was busy;
  `ifq_arp`: ARP held a newer packet for the same address (all `ifq_*`
  together are the interface queue's drops); `rtr_cbk`: packets the
  routing agent dropped after the MAC reported a broken link, the one that
  failed and those queued for the same next hop; `rtr_nrte`: no route;
  `rtr_ifq`: the routing agent's buffer of packets awaiting a route was
  full; ...). Counters ns-2 has no equivalent for (busy time, backoffs,
  defers, queue lengths, signal levels) are left out, never written as 0.
- routing (metrics.routing), over the whole run as for the lab's daemons:
  control packets and their IP bytes the routing agents sent (`s`/`f` RTR
  events of AODV, DSR and DSDV packets), and per AODV message kind, named as
  aodvd names them (`rreq`, `rrep`, `rerr`, `hello`), those transmissions
  (`messages`, as a lab's record has them) and the `s` lines alone
  (`ns2_sent`: what an agent sent as its own, every RREQ and RERR
  transmission, rebroadcasts included, and the RREPs it originated; `f`
  lines are RREPs forwarded along a reverse route).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .scenario import TCP_TICK_S, FlowSetup

# Packet types the routing agents send: AODV, DSR, DSDV ("message").
ROUTING_TYPES = {"AODV", "DSR", "message"}
# ns-2's names of AODV's messages -> aodvd's, which a lab's record uses.
AODV_KINDS = {"REQUEST": "rreq", "REPLY": "rrep", "ERROR": "rerr", "HELLO": "hello"}
MAC_CONTROL = {"RTS", "CTS", "ACK"}
# Lines between two calls of a reader's check (about a tenth of a second).
CHECK_EVERY = 1 << 16
BROADCAST = "ffffffff"
# Per-node counters with the lab's names, in the order they are reported.
NODE_COUNTERS = ("tx_data_frames", "data_attempts", "tx_broadcast_frames", "rts_attempts", "cts_sent", "acks_sent",
                 "retry_drops", "queue_drops", "rx_frames", "rx_duplicates")


def drop_name(level: str, reason: str) -> str:
    """A `D` line's name in `ns2_drops`: `mac_ret`, `rtr_cbk`, `ifq_full` (a
    full interface queue, logged with reason `---`), ..."""
    return f"{level.lower()}_{'full' if reason == '---' else reason.lower()}"


class TraceError(Exception):
    """The samples or the trace are not what the scenario writes."""


@dataclass
class Samples:
    """samples.txt: the flows' addresses, the agents' variables over time,
    and how far the model got."""

    ports: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # flow -> src, sport, dst, dport
    tcp: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    sink: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    time_s: float = 0.0
    finished: bool = False


def read_samples(path: Path) -> Samples:
    samples = Samples()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return samples
    for number, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        try:
            if parts[0] == "flow":
                src, sport, dst, dport = (int(part) for part in parts[2:6])
                samples.ports[parts[1]] = (src, sport, dst, dport)
            elif parts[0] in ("tcp", "sink"):
                row = {"t": float(parts[2])}
                row.update((name, float(value)) for name, value in (part.split("=", 1) for part in parts[3:]))
                (samples.tcp if parts[0] == "tcp" else samples.sink).setdefault(parts[1], []).append(row)
            elif parts[0] in ("time", "end"):
                samples.time_s = float(parts[1])
                samples.finished = parts[0] == "end"
            else:
                raise ValueError(f"unknown line kind {parts[0]!r}")
        except (ValueError, IndexError) as exc:
            raise TraceError(f"{path}:{number}: {exc}: {line!r}") from None
    return samples


def tail_time(path: Path) -> float | None:
    """The model time in the last complete line of samples.txt (progress of
    a run under way)."""
    try:
        with open(path, "rb") as file:
            file.seek(0, 2)
            file.seek(max(0, file.tell() - 512))
            lines = file.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return None
    for line in reversed(lines[1:] if len(lines) > 1 else lines):
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("time", "end"):
            try:
                return float(parts[1])
            except ValueError:
                continue
    return None


def _spread(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {"mean": sum(values) / len(values), "min": ordered[0], "max": ordered[-1],
            "p50": ordered[len(ordered) // 2]}


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class _UdpFlow:
    setup: FlowSetup
    start_s: float
    end_s: float
    sent: dict[str, tuple[float, int]] = field(default_factory=dict)  # uid -> send time, sequence number
    received: set[str] = field(default_factory=set)
    delays: list[float] = field(default_factory=list)
    hops: list[int] = field(default_factory=list)
    jitter_s: float = 0.0
    last_transit: float | None = None
    highest_seq: int = -1
    reordered: int = 0
    duplicates: int = 0


@dataclass
class _TcpFlow:
    setup: FlowSetup
    start_s: float
    end_s: float
    hops: list[int] = field(default_factory=list)


class TraceReader:
    """Accumulates the metrics of one run from its trace lines."""

    def __init__(self, flows: Iterable[FlowSetup], ports: dict[str, tuple[int, int, int, int]], node_count: int,
                 window_ns: tuple[int, int]):
        self.warm_s, self.end_s = window_ns[0] / 1e9, window_ns[1] / 1e9
        self.nodes = [dict.fromkeys(NODE_COUNTERS, 0) for _ in range(node_count)]
        self.drops: list[dict[str, int]] = [{} for _ in range(node_count)]
        self.retry_drops_by_packet: list[dict[str, int]] = [{} for _ in range(node_count)]
        self.control_packets = 0
        self.control_bytes = 0
        self.messages: dict[str, int] = {}  # AODV message kind -> transmissions (s and f)
        self.sent: dict[str, int] = {}  # AODV message kind -> s lines
        # (src field, dst field) of the AGT lines, as printed: "[0:0", "3:0".
        self.udp: dict[tuple[str, str], _UdpFlow] = {}
        self.tcp: dict[tuple[str, str], _TcpFlow] = {}
        for setup in flows:
            if setup.name not in ports:
                raise TraceError(f"the scenario did not report the agents of flow {setup.name}")
            src, sport, dst, dport = ports[setup.name]
            key = (f"[{src}:{sport}", f"{dst}:{dport}")
            start, end = setup.window_ns[0] / 1e9, setup.window_ns[1] / 1e9
            if setup.kind == "udp":
                self.udp[key] = _UdpFlow(setup, start, end)
            else:
                self.tcp[key] = _TcpFlow(setup, start, end)
        self.lines = 0

    def read(self, path: Path, check: Callable[[], None] = lambda: None) -> None:
        """Every line of the trace file; `check()` every so many lines (it
        raises to stop: a large trace takes a while)."""
        with open(path, "r", errors="replace") as trace:
            for number, line in enumerate(trace):
                if number % CHECK_EVERY == 0:
                    check()
                self.feed(line)

    def feed(self, line: str) -> None:
        parts = line.split()
        if len(parts) < 8 or parts[0] not in ("s", "r", "f", "D"):
            return
        self.lines += 1
        event, level = parts[0], parts[3]
        if level == "AGT":
            if len(parts) > 14:
                self._agent(event, parts)
            return
        if level == "RTR" and event in ("s", "f") and parts[6] in ROUTING_TYPES:
            self.control_packets += 1
            self.control_bytes += int(parts[7])
            if parts[6] == "AODV" and parts[-1].startswith("("):
                name = parts[-1].strip("()")
                message = AODV_KINDS.get(name, name.lower())
                self.messages[message] = self.messages.get(message, 0) + 1
                if event == "s":
                    self.sent[message] = self.sent.get(message, 0) + 1
        time = float(parts[1])
        if not self.warm_s <= time <= self.end_s:
            return
        node = int(parts[2].strip("_"))
        kind = parts[6]
        if event == "D":
            reason = parts[4]
            if level == "MAC" and reason == "RET" and kind == "RTS":
                # At the short retry limit ns-2 drops the RTS and then the data frame: one failure,
                # counted at the frame's line; this one says it failed for want of a CTS.
                self.drops[node]["mac_ret_rts"] = self.drops[node].get("mac_ret_rts", 0) + 1
                return
            counters = self.nodes[node]
            if level == "MAC" and reason == "RET":
                counters["retry_drops"] += 1
                by_packet = self.retry_drops_by_packet[node]
                by_packet[kind] = by_packet.get(kind, 0) + 1
            elif level == "MAC" and reason == "DUP":
                counters["rx_duplicates"] += 1
            elif level == "IFQ" and reason == "---":
                counters["queue_drops"] += 1
            name = drop_name(level, reason)
            self.drops[node][name] = self.drops[node].get(name, 0) + 1
        elif level == "MAC":
            counters = self.nodes[node]
            if event == "s":
                if kind == "RTS":
                    counters["rts_attempts"] += 1
                elif kind == "CTS":
                    counters["cts_sent"] += 1
                elif kind == "ACK":
                    counters["acks_sent"] += 1
                elif parts[9] == BROADCAST:
                    counters["tx_broadcast_frames"] += 1
                else:
                    counters["data_attempts"] += 1
            elif event == "r":
                if kind == "ACK":
                    counters["tx_data_frames"] += 1
                elif kind not in MAC_CONTROL:
                    counters["rx_frames"] += 1

    def _agent(self, event: str, parts: list[str]) -> None:
        key = (parts[13], parts[14])
        udp = self.udp.get(key)
        if udp is not None and parts[6] == "cbr":
            time = float(parts[1])
            uid = parts[5]
            if event == "s":
                if udp.start_s <= time < udp.end_s:
                    udp.sent[uid] = (time, int(parts[17].strip("[]")))
            elif event == "r" and uid in udp.sent:
                if uid in udp.received:
                    udp.duplicates += 1
                    return
                udp.received.add(uid)
                sent_at, seq = udp.sent[uid]
                transit = time - sent_at
                udp.delays.append(transit)
                udp.hops.append(int(parts[18]))
                if udp.last_transit is not None:
                    udp.jitter_s += (abs(transit - udp.last_transit) - udp.jitter_s) / 16
                udp.last_transit = transit
                if seq < udp.highest_seq:
                    udp.reordered += 1
                udp.highest_seq = max(udp.highest_seq, seq)
            return
        tcp = self.tcp.get(key)
        if tcp is not None and event == "r" and parts[6] == "tcp" and tcp.start_s <= float(parts[1]) <= tcp.end_s:
            tcp.hops.append(int(parts[19]))

    # --- results ---

    def medium(self, names: list[str]) -> dict[str, Any]:
        """metrics.medium: per node and summed."""
        nodes = {name: {**counters, "ns2_drops": drops, "retry_drops_by_packet": by_packet, **_derived(counters)}
                 for name, counters, drops, by_packet in zip(names, self.nodes, self.drops, self.retry_drops_by_packet)}
        total: dict[str, Any] = {key: sum(counters[key] for counters in self.nodes) for key in NODE_COUNTERS}
        total["ns2_drops"] = _summed(self.drops)
        total["retry_drops_by_packet"] = _summed(self.retry_drops_by_packet)
        total.update(_derived(total))
        return {"nodes": nodes, "total": total}

    def routing(self) -> dict[str, Any]:
        aodv = {"messages": dict(sorted(self.messages.items())),
                "ns2_sent": dict(sorted(self.sent.items()))} if self.messages else {}
        return {"control_bytes": self.control_bytes, "control_packets": self.control_packets, **aodv}

    def udp_metrics(self, name: str, sink_rows: list[dict[str, float]], rate_bps: int) -> dict[str, Any]:
        udp = next(flow for flow in self.udp.values() if flow.setup.name == name)
        seconds = udp.end_s - udp.start_s
        received = len(udp.received)
        sent = len(udp.sent)
        ordered = sorted(udp.delays)
        delay = None if not ordered else {
            "min": ordered[0] * 1e3, "mean": sum(ordered) / len(ordered) * 1e3, "p50": _quantile(ordered, 0.5) * 1e3,
            "p95": _quantile(ordered, 0.95) * 1e3, "p99": _quantile(ordered, 0.99) * 1e3, "max": ordered[-1] * 1e3}
        return {
            "goodput_bps": received * udp.setup.payload * 8 / seconds,
            "offered_bps": rate_bps,
            "packets_sent": sent,
            "packets_received": received,
            "loss": 1 - received / sent if sent else None,
            "delay_ms": delay,
            "jitter_ms": udp.jitter_s * 1e3,
            "reordered": udp.reordered,
            "duplicates": udp.duplicates,
            "route_length": sum(udp.hops) / len(udp.hops) if udp.hops else None,
            "sink_packets": _delta(sink_rows, udp.start_s, udp.end_s, "npkts_"),
        }

    def tcp_metrics(self, name: str, rows: list[dict[str, float]], congestion: str) -> dict[str, Any]:
        tcp = next(flow for flow in self.tcp.values() if flow.setup.name == name)
        start, end = tcp.start_s, tcp.end_s
        seconds = end - start
        mss = tcp.setup.payload
        if not rows:
            return {"error": "the scenario sampled no TCP agent variables"}
        acked = round(_delta(rows, start, end, "ack_")) * mss
        retransmitted = round(_delta(rows, start, end, "nrexmitbytes_"))
        inside = [row for row in rows if start <= row["t"] <= end]
        connected = [row for row in inside if row["ack_"] >= 0]
        return {
            "goodput_bps": acked * 8 / seconds,
            "throughput_bps": (acked + retransmitted) * 8 / seconds,
            "bytes_acked": acked,
            "bytes_sent": round(_delta(rows, start, end, "ndatabytes_")),
            "bytes_retrans": retransmitted,
            "retransmits": round(_delta(rows, start, end, "nrexmitpack_")),
            "segments_out": round(_delta(rows, start, end, "ndatapack_")),
            "mss": mss,
            "congestion": congestion,
            "rtt_ms": _spread([row["srtt_"] / 8 * TCP_TICK_S * 1e3 for row in connected]),
            "cwnd": _spread([row["cwnd_"] for row in connected]),
            "in_flight": _spread([row["t_seqno_"] - row["ack_"] - 1 for row in connected]),
            "rto_events": round(_delta(rows, start, end, "nrexmit_")),
            "samples": len(inside),
            "route_length": sum(tcp.hops) / len(tcp.hops) if tcp.hops else None,
        }


def _at(rows: list[dict[str, float]], time: float, key: str) -> float:
    """The variable's value at `time`: the last sample at or before it."""
    value = None
    for row in rows:
        if row["t"] > time + 1e-9:
            break
        value = row[key]
    if value is None:
        raise TraceError(f"no sample of {key} at or before {time:g} s")
    return value


def _delta(rows: list[dict[str, float]], start: float, end: float, key: str) -> float:
    return _at(rows, end, key) - _at(rows, start, key)


def _summed(per_node: list[dict[str, int]]) -> dict[str, int]:
    """Per-node counts by key, summed over the nodes, keys in order."""
    total: Counter[str] = Counter()
    for counts in per_node:
        total.update(counts)
    return dict(sorted(total.items()))


def _derived(counters: dict[str, Any]) -> dict[str, float]:
    """The lab's derived figures that ns-2's counters support (metrics.derived
    less busy time and backoffs, which ns-2 does not count)."""
    frames = counters["tx_data_frames"] + counters["retry_drops"]
    return {"mac_drop_fraction": counters["retry_drops"] / frames if frames else 0.0,
            "rts_per_frame": counters["rts_attempts"] / frames if frames else 0.0}
