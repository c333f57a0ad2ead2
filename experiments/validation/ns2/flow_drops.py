"""Where one TCP flow's packets die in an ns-2 trace: its data segments and
its ACKs within a time window, dropped by reason (named as in a record's
`ns2_drops`) and by node (a `D MAC COL` line is a copy lost at a receiver,
not a loss of the packet, and is left out), and the segments the sender's agent sent (distinct sequence numbers
and repeats) against those its sink received.

The driver deletes a run's trace once read; its kept scenario writes it
again, identical. From the repository root, for grid13's client c90 (node
90, port 6 of the server n84 in the run's samples.txt `flow` line):

    (cd DIR/runs/RUN && ns scenario.tcl)
    python experiments/validation/ns2/flow_drops.py DIR/runs/RUN/trace.tr --src 90 --dst 84 --dst-port 6 \\
        --window 12 150
"""

from __future__ import annotations

import argparse
import collections
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from meshemu.ns2.trace import drop_name


@dataclass
class Account:
    """One flow's packets in a trace window."""

    sent: collections.Counter[int] = field(default_factory=collections.Counter)  # data seqno -> times sent
    received: set[int] = field(default_factory=set)  # data seqnos the sink's agent got
    # (node, drop name as in a record's ns2_drops) -> packets
    drops: dict[str, collections.Counter[tuple[int, str]]] = field(
        default_factory=lambda: {"data": collections.Counter(), "ack": collections.Counter()})


def account(lines: Iterable[str], src: tuple[int, int], dst: tuple[int, int],
            window: tuple[float, float]) -> Account:
    """The flow from `src` to `dst` ((node, port) each) in trace `lines`,
    whose fields are where meshemu.ns2.trace reads them: the IP header's
    "[src:port dst:port" at 13-14, the TCP header's "[seqno" at 17."""
    data = (f"[{src[0]}:{src[1]}", f"{dst[0]}:{dst[1]}")
    ack = (f"[{dst[0]}:{dst[1]}", f"{src[0]}:{src[1]}")
    found = Account()
    for line in lines:
        parts = line.split()
        if len(parts) < 18 or parts[6] not in ("tcp", "ack") or (parts[13], parts[14]) not in (data, ack):
            continue
        if not window[0] <= float(parts[1]) <= window[1]:
            continue
        event, node, level, reason = parts[0], int(parts[2].strip("_")), parts[3], parts[4]
        kind = "data" if (parts[13], parts[14]) == data else "ack"
        seqno = int(parts[17].strip("["))
        if event == "D" and (level, reason) != ("MAC", "COL"):
            found.drops[kind][(node, drop_name(level, reason))] += 1
        elif kind == "data" and level == "AGT" and event == "s":
            found.sent[seqno] += 1
        elif kind == "data" and level == "AGT" and event == "r" and node == dst[0]:
            found.received.add(seqno)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", type=Path)
    parser.add_argument("--src", type=int, required=True, help="the sender's node (ns-2 address)")
    parser.add_argument("--dst", type=int, required=True, help="the receiver's node")
    parser.add_argument("--src-port", type=int, default=0, help="the sender agent's port (default 0)")
    parser.add_argument("--dst-port", type=int, required=True, help="the sink's port on the receiver")
    parser.add_argument("--window", type=float, nargs=2, default=(0.0, float("inf")), metavar=("START", "END"),
                        help="seconds (default the whole trace)")
    args = parser.parse_args()
    with args.trace.open() as trace:
        found = account(trace, (args.src, args.src_port), (args.dst, args.dst_port), tuple(args.window))
    repeats = sum(found.sent.values()) - len(found.sent)
    print(f"data segments sent {sum(found.sent.values())}: {len(found.sent)} distinct, {repeats} repeats; "
          f"{len(found.received)} distinct received")
    for kind, counts in found.drops.items():
        reasons: collections.Counter[str] = collections.Counter()
        nodes: collections.Counter[int] = collections.Counter()
        for (node, reason), count in counts.items():
            reasons[reason] += count
            nodes[node] += count
        print(f"{kind} dropped {sum(counts.values())}: by reason "
              + ", ".join(f"{reason} {count}" for reason, count in reasons.most_common())
              + "; by node " + ", ".join(f"{node} {count}" for node, count in nodes.most_common(8)))


if __name__ == "__main__":
    main()
