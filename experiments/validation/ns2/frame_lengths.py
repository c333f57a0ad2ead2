"""Counts a lab's frames by outcome, network length and node, to set beside
the packet types and nodes of ns-2's trace lines.

Waits for the next lab to come up (a new control socket under
/run/meshemu), subscribes to its `drop` events (emulator/README.md §6),
with `--all` also to its `tx` and `rx` events, and, when the lab goes
down, writes the counts as JSON: the frames of each kind and, for each
kind, by network length and node. The kinds: `retry_drop` (at the retry
limit), `queue_drop` (at a full queue), `link_drop` (flushed after a
failure to the same next hop); with `--all`, `acked` and `broadcast` (sent)
and `rx` (received by the node they were sent to, or by a broadcast's
receivers; frames overheard in promiscuous mode left out). With `--all`
a node's `rx` of a length less what it sent or dropped of that length is
what its IP layer dropped (no route, TTL) or took in. Start it as root just
before `meshemu run` of one run:

    python experiments/validation/ns2/frame_lengths.py OUT.json &
    meshemu run FILE --only ... --set "seeds=[1]" --out DIR
    wait

In grid13-floods.yaml a length of 1480 is a flood packet, 48 an AODV RREP,
28 an ARP packet; in grid13-udp-clients.yaml's `two-way` case 68 is a
packet from n84 back to a client.
"""

from __future__ import annotations

import argparse
import collections
import json
import socket
import time
from pathlib import Path
from typing import Any, Iterator

from meshemu.lab import CONTROL_SOCKET
from meshemu.state import RUN_ROOT


def control_sockets() -> set[Path]:
    return set(RUN_ROOT.glob(f"*/{CONTROL_SOCKET}"))


def next_lab(known: set[Path], timeout_s: float) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        new = control_sockets() - known
        if new:
            return new.pop()
        time.sleep(0.2)
    raise SystemExit(f"frame_lengths: no new lab under {RUN_ROOT} within {timeout_s:.0f} s")


def kind_of(event: dict) -> str | None:
    """The count an event goes to; None for the subscription's
    acknowledgement and for overheard frames."""
    if event.get("event") in ("tx", "drop"):
        return event["outcome"]["kind"]
    if event.get("event") == "rx" and not event["overheard"]:
        return "rx"
    return None


def subscription(path: Path, events: list[str]) -> Iterator[dict[str, Any]]:
    """The medium's `events` from the lab whose control socket is `path`,
    from the subscription's acknowledgement until the lab goes down; a
    subscriber that fell behind and lost some is refused."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(str(path))
        connection.sendall(json.dumps({"op": "subscribe", "events": events}).encode() + b"\n")
        for line in connection.makefile("rb"):
            event = json.loads(line)
            if event.get("event") == "dropped":
                raise SystemExit(f"fell behind the medium and lost {event['count']} events")
            yield event


def count(path: Path, events: list[str]) -> dict[str, object]:
    totals: collections.Counter[str] = collections.Counter()
    # kind -> length -> node -> frames
    frames: dict[str, dict[int, collections.Counter[str]]] = collections.defaultdict(
        lambda: collections.defaultdict(collections.Counter))
    for event in subscription(path, events):
        kind = kind_of(event)
        if kind is None:
            continue
        totals[kind] += 1
        frames[kind][event["len"]][event["node"]] += 1
    return {"lab": str(path.parent), "events": dict(totals),
            "by_length": {kind: {str(length): sum(nodes.values()) for length, nodes in sorted(lengths.items())}
                          for kind, lengths in frames.items()},
            "by_length_and_node": {kind: {str(length): dict(nodes.most_common())
                                          for length, nodes in sorted(lengths.items())}
                                   for kind, lengths in frames.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="where to write the counts (JSON)")
    parser.add_argument("--all", action="store_true", help="count the frames sent and received too, not only drops")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for a lab (600)")
    args = parser.parse_args()
    lab = next_lab(control_sockets(), args.timeout)
    time.sleep(0.5)  # the medium listens a moment after it creates the socket
    events = ["tx", "rx", "drop"] if args.all else ["drop"]
    args.out.write_text(json.dumps(count(lab, events), indent=1) + "\n")


if __name__ == "__main__":
    main()
