"""What the page draws, made from what the medium says.

A *snapshot* is the medium's answers at one moment: `positions`, `stats`
(with peers) and `links` (section 6 of emulator/README.md). A *frame* is the
compact picture the page needs, by node index:

    {"t": model time (s),
     "pos": [[x, y], ...],
     "air": [[busy fraction, queue length, retries/s, retry drops/s,
              queue drops/s, link drops/s], ...]   (since the previous frame),
     "links": [[a, b, delivery ratio or null, signal dBm, both ways], ...]}

A link is a pair in receive range now (one or both ways); its delivery ratio
is acknowledged / (acknowledged + failed) unicast frames between the two, both
directions, over the last LINK_WINDOW_S (null without unicast traffic then);
its signal the stronger last received power of the pair's per-peer entries,
or the model's median power when no frame was decoded yet.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

LINK_WINDOW_S = 5.0
AIR_FIELDS = ("busy", "queue", "retries_per_s", "retry_drops_per_s", "queue_drops_per_s", "link_drops_per_s")


@dataclass(frozen=True)
class Snapshot:
    time_ns: int
    positions: dict[str, list[float]]
    stats: dict[str, dict[str, Any]]
    links: list[dict[str, Any]]


def retries(counters: dict[str, Any]) -> int:
    """Data and RTS retransmissions: a frame finished after k+1 attempts is
    counted at index k of the histograms (the last bucket: 16 or more)."""
    return sum(k * count for name in ("data_attempts_hist", "rts_attempts_hist")
               for k, count in enumerate(counters.get(name, [])))


class FrameMaker:
    """Frames from successive snapshots of one lab; keeps what the rates
    and the windowed delivery ratios need."""

    def __init__(self, names: list[str]):
        self.names = names
        self.index = {name: i for i, name in enumerate(names)}
        self._previous: Snapshot | None = None
        # (time_ns, {(a, b): (tx_acked, tx_failed)}) over the last LINK_WINDOW_S.
        self._deliveries: deque[tuple[int, dict[tuple[int, int], tuple[int, int]]]] = deque()

    def frame(self, snapshot: Snapshot) -> dict[str, Any]:
        frame = {"t": round(snapshot.time_ns / 1e9, 3),
                 "pos": [[round(c, 2) for c in snapshot.positions[name][:2]] for name in self.names],
                 "air": self._air(snapshot),
                 "links": self._links(snapshot)}
        self._previous = snapshot
        return frame

    def _air(self, snapshot: Snapshot) -> list[list[float]]:
        previous = self._previous
        elapsed_ns = snapshot.time_ns - previous.time_ns if previous else 0
        rows = []
        for name in self.names:
            now = snapshot.stats[name]
            if previous is None or elapsed_ns <= 0:
                rows.append([0.0, now.get("queue_len", 0), 0.0, 0.0, 0.0, 0.0])
                continue
            before = previous.stats[name]
            per_s = 1e9 / elapsed_ns

            def rate(value_now: int, value_before: int) -> float:
                return round(max(value_now - value_before, 0) * per_s, 2)

            rows.append([round(min(max(now["busy_ns"] - before["busy_ns"], 0) / elapsed_ns, 1.0), 4),
                         now.get("queue_len", 0),
                         rate(retries(now), retries(before)),
                         rate(now["retry_drops"], before["retry_drops"]),
                         rate(now["queue_drops"], before["queue_drops"]),
                         rate(now["link_drops"], before["link_drops"])])
        return rows

    def _links(self, snapshot: Snapshot) -> list[list[Any]]:
        deliveries: dict[tuple[int, int], tuple[int, int]] = {}
        heard: dict[tuple[int, int], float] = {}  # (from, to) -> last received power at `to`, dBm
        for name, counters in snapshot.stats.items():
            me = self.index[name]
            for peer in counters.get("peers", []):
                other = self.index.get(peer["node"])
                if other is None:
                    continue
                deliveries[(me, other)] = (peer["tx_acked"], peer["tx_failed"])
                if peer["last_rx_power_mdbm"]:  # 0 until a frame from the peer was decoded
                    heard[(other, me)] = peer["last_rx_power_mdbm"] / 1000
        self._deliveries.append((snapshot.time_ns, deliveries))
        while len(self._deliveries) > 2 and snapshot.time_ns - self._deliveries[1][0] >= LINK_WINDOW_S * 1e9:
            self._deliveries.popleft()
        oldest = self._deliveries[0][1]

        pairs: dict[tuple[int, int], dict[str, Any]] = {}
        for link in snapshot.links:
            if not link.get("in_rx_range"):
                continue
            a, b = link["a"], link["b"]
            pair = pairs.setdefault((min(a, b), max(a, b)), {"ways": 0, "median": link["rx_power_dbm"]})
            pair["ways"] += 1
            pair["median"] = max(pair["median"], link["rx_power_dbm"])

        rows = []
        for (a, b), pair in sorted(pairs.items()):
            acked = failed = 0
            for key in ((a, b), (b, a)):
                acked_now, failed_now = deliveries.get(key, (0, 0))
                acked_then, failed_then = oldest.get(key, (0, 0))
                acked += acked_now - acked_then
                failed += failed_now - failed_then
            ratio = round(acked / (acked + failed), 3) if acked + failed > 0 else None
            measured = [heard[key] for key in ((a, b), (b, a)) if key in heard]
            signal = max(measured) if measured else pair["median"]
            rows.append([a, b, ratio, round(signal, 1), pair["ways"] == 2])
        return rows
