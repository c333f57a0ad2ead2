"""Where the packets one node sends on its UDP flows end, in ns-2 and in
the lab: lost at the retry limit or flushed from a queue after a link
failure (each at the sending node or at a relay), at a full queue, or
otherwise (no route at a relay, TTL, ...).

    python experiments/validation/ns2/packet_fates.py ns2 TRACE... --src 84 --window 12 150
    python experiments/validation/ns2/packet_fates.py lab DIR --src n84 --length 68 \\
        --counts 'COUNTS-{seed}.json' --flows a0 a12 a156 a168 a6 a78 a90 a162

ns-2 (a trace the kept scenario writes again: `ns scenario.tcl` in the
run's directory): the node's `cbr` packets its agents sent within the
window; a lost packet ends at its `D MAC RET` line if it has one (ns-2's
AODV logs the failed packet again as `D RTR CBK`), else at its last drop
line: `RTR CBK` flushed, `IFQ` a full interface queue (`IFQ ARP`: ARP's
one-packet hold), any other reason other, listed by its name in a record's
`ns2_drops` (`rtr_nrte` no route at a relay, `rtr_ifq` AODV's send buffer
full, ...; `no line`: never dropped, as one still queued at the end). Of
`rtr_nrte`, those AODV had
held at the source while it searched a route are counted apart: ns-2's
AODV releases them 10 ms apart, each addressed to the next hop the route
had when the reply came (`forward` sets it before the delay). `MAC COL` and `MAC DUP` lines are copies, not the packet.

The lab: each run of DIR's records, the flows' packets sent in the window
and received from the record, the drops from `frame_lengths.py`'s counts
of that run (`{seed}` in the pattern is the run's seed): frames of the
flows' network length by node, over the whole run; what the medium did
not drop is other. So the flows' packets must be the only ones of that
length, and the drops outside the window few (in grid13-udp-clients.yaml
nothing is lost before the floods start with the window).
"""

from __future__ import annotations

import argparse
import collections
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from meshemu.ns2.trace import drop_name


@dataclass
class Fates:
    """One run's packets of the flows: sent in the window, lost, and the
    lost ones by fate."""

    sent: int = 0
    lost: int = 0
    retry_src: int = 0
    retry_relay: int = 0
    flushed_src: int = 0
    flushed_relay: int = 0
    queue: int = 0
    # ns-2 only: the other by the name of their last drop line, and of those dropped for want
    # of a route at a relay (`rtr_nrte`), the ones the source had held during a route search
    other_reasons: collections.Counter[str] | None = None
    no_route_held: int = 0

    @property
    def other(self) -> int:
        return self.lost - self.retry_src - self.retry_relay - self.flushed_src - self.flushed_relay - self.queue

    def line(self) -> str:
        text = (f"sent {self.sent} lost {self.lost} ({self.lost / self.sent:.3f}): "
                f"retry limit {self.retry_src}+{self.retry_relay}, flushed {self.flushed_src}+{self.flushed_relay} "
                f"(at the source + at relays), full queue {self.queue}, other {self.other}")
        if self.other_reasons is None:
            return text
        reasons = [f"{reason} {count}" + (f", {self.no_route_held} of them held by the source"
                                          if reason == "rtr_nrte" else "")
                   for reason, count in self.other_reasons.most_common()]
        return f"{text} ({'; '.join(reasons)})"


def ns2_fates(lines: Iterable[str], src: int, window: tuple[float, float]) -> Fates:
    """The fates of `src`'s cbr packets in ns-2 trace `lines` (fields as
    meshemu.ns2.trace reads them: the IP header's "[src:port dst:port" at
    13-14, the cbr sequence number "[n]" at 17)."""
    sent: set[tuple[str, str, str]] = set()
    received: set[tuple[str, str, str]] = set()
    held: set[tuple[str, str, str]] = set()  # routed by the source later than its agent sent them
    agent_sent: dict[tuple[str, str, str], float] = {}
    drops: dict[tuple[str, str, str], list[tuple[int, str]]] = {}  # packet -> (node, drop name) in order
    prefix = f"[{src}:"
    for line in lines:
        parts = line.split()
        if len(parts) < 18 or parts[6] != "cbr" or not parts[13].startswith(prefix):
            continue
        packet = (parts[13], parts[14], parts[17])
        event, level, time = parts[0], parts[3], float(parts[1])
        if event == "s" and level == "AGT":
            agent_sent[packet] = time
            if window[0] <= time <= window[1]:
                sent.add(packet)
        elif event == "s" and level == "RTR" and time > agent_sent.get(packet, time) + 1e-3:
            held.add(packet)
        elif event == "r" and level == "AGT":
            received.add(packet)
        elif event == "D" and (name := drop_name(level, parts[4])) not in ("mac_col", "mac_dup"):
            drops.setdefault(packet, []).append((int(parts[2].strip("_")), name))
    fates = Fates(sent=len(sent), lost=len(sent - received), other_reasons=collections.Counter())
    for packet in sent - received:
        events = drops.get(packet, [])
        retried = [node for node, name in events if name == "mac_ret"]
        if retried:
            if retried[0] == src:
                fates.retry_src += 1
            else:
                fates.retry_relay += 1
        elif events and events[-1][1] == "rtr_cbk":
            if events[-1][0] == src:
                fates.flushed_src += 1
            else:
                fates.flushed_relay += 1
        elif events and events[-1][1].startswith("ifq_"):
            fates.queue += 1
        else:
            reason = events[-1][1] if events else "no line"
            fates.other_reasons[reason] += 1
            fates.no_route_held += reason == "rtr_nrte" and packet in held
    return fates


def lab_fates(record: dict, counts: dict, src: str, flows: list[str], length: int) -> Fates:
    """The fates of the packets of `flows` (sent by node `src`) in one lab
    run: `record` from runs.jsonl, `counts` from frame_lengths.py."""
    by_name = {flow["name"]: flow for flow in record["metrics"]["flows"]}
    missing = [name for name in flows if name not in by_name]
    if missing:
        raise SystemExit(f"packet_fates: run {record['run_id']} has no flow {', '.join(missing)}")
    fates = Fates(sent=sum(by_name[name]["packets_sent"] for name in flows))
    fates.lost = fates.sent - sum(by_name[name]["packets_received"] for name in flows)

    def at(kind: str) -> tuple[int, int]:
        nodes = counts["by_length_and_node"].get(kind, {}).get(str(length), {})
        return nodes.get(src, 0), sum(nodes.values()) - nodes.get(src, 0)

    fates.retry_src, fates.retry_relay = at("retry_drop")
    fates.flushed_src, fates.flushed_relay = at("link_drop")
    fates.queue = sum(at("queue_drop"))
    return fates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    substrates = parser.add_subparsers(dest="substrate", required=True)
    ns2 = substrates.add_parser("ns2", help="ns-2 traces")
    ns2.add_argument("traces", type=Path, nargs="+")
    ns2.add_argument("--src", type=int, required=True, help="the sending node (ns-2 address)")
    ns2.add_argument("--window", type=float, nargs=2, default=(0.0, float("inf")), metavar=("START", "END"),
                     help="seconds (default the whole trace)")
    lab = substrates.add_parser("lab", help="the lab runs of a results directory")
    lab.add_argument("dir", type=Path)
    lab.add_argument("--src", required=True, help="the sending node")
    lab.add_argument("--flows", nargs="+", required=True, help="the names of the node's flows")
    lab.add_argument("--length", type=int, required=True, help="the flows' packets' network length")
    lab.add_argument("--counts", required=True, help="frame_lengths.py's output of each run, {seed} for its seed")
    args = parser.parse_args()
    if args.substrate == "ns2":
        for trace in args.traces:
            with trace.open(errors="replace") as lines:
                print(f"{trace}: {ns2_fates(lines, args.src, tuple(args.window)).line()}")
        return
    for row in (args.dir / "runs.jsonl").read_text().splitlines():
        record = json.loads(row)
        counts_path = Path(args.counts.format(seed=record["seed"]))
        if not counts_path.is_file():
            raise SystemExit(f"packet_fates: no counts {counts_path} for run {record['run_id']}")
        fates = lab_fates(record, json.loads(counts_path.read_text()), args.src, args.flows, args.length)
        print(f"seed {record['seed']} run {record['run_id']} ({record['software']['git']}): {fates.line()}")


if __name__ == "__main__":
    main()
