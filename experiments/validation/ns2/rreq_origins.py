"""Who originates the RREQ floods and how far each one travels, in an ns-2
trace or in the lab runs of a results directory:

    python experiments/validation/ns2/rreq_origins.py trace.tr --sources 80 32
    python experiments/validation/ns2/rreq_origins.py DIR --sources n80 n32
    python experiments/validation/ns2/rreq_origins.py trace.tr --attempts --window 5 35

A flood is one originated RREQ (ns-2: an `s ... RTR` REQUEST line with hop
count 1 at its originator; the lab: aodvd's `rreq_sent` event). Floods are
split by originator, the flows' sources or relays (local repairs), and, in
ns-2's trace, by TTL (network-wide or a ring) with the transmissions each
took and the replies sent to its originator, by the destination or by a node
with a route. The lab's transmissions are only counted in total (aodvd
counts what it sends, not per flood).

`--attempts` counts instead the RREQs originated in a window by their place
in their search: a search's first RREQ is attempt 1, each further one its
originator sends for the same destination before a reply reaches it one
more (a second RREQ means the first one's reply was lost or late). The lab
numbers them so itself (aodvd's `rreq_sent` events, one search from its
first RREQ to its reply or its give-up); in ns-2's trace a search ends where
a reply for its destination reaches its originator, or where the next RREQ
for it has a smaller TTL (a search given up and begun again with a ring).
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path
from typing import Iterator

from meshemu.experiment.results import ResultsDir


def _fields(line: str, start: str) -> list[str]:
    """The bracketed fields from `start` on, split on spaces and brackets."""
    return line[line.index(start):].replace("[", " ").replace("]", " ").split()


def ns2_floods(trace: Path, sources: set[int]) -> dict:
    floods: dict[tuple[int, int], list] = {}  # (originator, broadcast id) -> [kind, transmissions]
    latest: dict[int, str] = {}  # originator -> kind of its latest flood
    replies: collections.Counter = collections.Counter()
    with open(trace, errors="replace") as lines:
        for line in lines:
            if not line.startswith("s ") or " RTR " not in line:
                continue
            node = int(line.split()[2].strip("_"))
            ip = _fields(line, "------- [")  # "-------" src:port dst:port ttl next-hop
            if "(REQUEST)" in line:
                # [type hop-count bcast-id [dst dst-seq] [src src-seq]]
                request = _fields(line, "[0x")
                hops, bcast, origin = int(request[1]), int(request[2]), int(request[5])
                if hops == 1 and origin == node:
                    ring = "network-wide" if int(ip[3]) >= 30 else "ring"
                    kind = f"{'source' if origin in sources else 'relay'}, {ring}"
                    floods[(origin, bcast)] = [kind, 1]
                    latest[origin] = kind
                elif (origin, bcast) in floods:
                    floods[(origin, bcast)][1] += 1
            elif "(REPLY)" in line:
                # [type hop-count [dst dst-seq] lifetime]: sent by the replier to the RREQ's originator
                to = int(ip[2].split(":")[0])
                if to in latest:
                    by = "destination" if node == int(_fields(line, "[0x")[2]) else "node with a route"
                    replies[(latest[to], by)] += 1
    table: dict[str, dict] = {}
    for kind, sent in floods.values():
        row = table.setdefault(kind, {"floods": 0, "transmissions": 0})
        row["floods"] += 1
        row["transmissions"] += sent
    for kind, row in table.items():
        row["per_flood"] = round(row["transmissions"] / row["floods"], 1)
        row["replies"] = {by: replies[(kind, by)] for by in ("destination", "node with a route")}
    return dict(sorted(table.items()))


def ns2_attempts(trace: Path, window: tuple[float, float]) -> dict[int, int]:
    """The RREQs originated in the window (trace seconds) by their attempt."""
    searches: dict[tuple[int, int], tuple[int, int]] = {}  # (originator, destination) -> (RREQs sent, last TTL)
    attempts: collections.Counter = collections.Counter()
    with open(trace, errors="replace") as lines:
        for line in lines:
            if " RTR " not in line:
                continue
            words = line.split()
            node = int(words[2].strip("_"))
            if words[0] == "s" and "(REQUEST)" in line:
                # [type hop-count bcast-id [dst dst-seq] [src src-seq]]
                request = _fields(line, "[0x")
                hops, dst, origin = int(request[1]), int(request[3]), int(request[5])
                if hops != 1 or origin != node:
                    continue
                ttl = int(_fields(line, "------- [")[3])
                sent, last_ttl = searches.get((origin, dst), (0, 0))
                sent = sent + 1 if ttl >= last_ttl else 1
                searches[(origin, dst)] = (sent, ttl)
                if window[0] <= float(words[1]) <= window[1]:
                    attempts[sent] += 1
            elif words[0] == "r" and "(REPLY)" in line:
                # [type hop-count [dst dst-seq] lifetime], received by the RREQ's originator
                if int(_fields(line, "------- [")[2].split(":")[0]) == node:
                    searches.pop((node, int(_fields(line, "[0x")[2])), None)
    return dict(sorted(attempts.items()))


def lab_rreqs(routing: Path) -> Iterator[dict]:
    """aodvd's `rreq_sent` events, every node's, from a run's routing directory."""
    for path in sorted(routing.glob("*.aodv-events.jsonl")):
        with open(path) as events:
            for line in events:
                if '"rreq_sent"' in line:
                    yield json.loads(line)


def lab_attempts(out: Path, record: dict, window: tuple[float, float]) -> dict[int, int]:
    """The RREQs aodvd originated in the window (seconds of the run) by their attempt."""
    run = out / "runs" / record["run_id"]
    t0 = json.loads((run / "clock.json").read_text())["run_t0_mono_ns"]
    attempts = collections.Counter(event["attempt"] for event in lab_rreqs(run / "routing")
                                   if window[0] <= (event["mono_ns"] - t0) / 1e9 <= window[1])
    return dict(sorted(attempts.items()))


def lab_floods(out: Path, record: dict, sources: set[str]) -> dict:
    routing = out / "runs" / record["run_id"] / "routing"
    addresses = {}
    originated: collections.Counter = collections.Counter()
    transmissions = 0
    for path in sorted(routing.glob("*.aodv.json")):
        status = json.loads(path.read_text())
        addresses[status["address"]] = path.name.split(".")[0]
        transmissions += status["control_sent"].get("rreq", {}).get("packets", 0)
    for event in lab_rreqs(routing):
        originated["source" if addresses.get(event["node"]) in sources else "relay"] += 1
    return {"seed": record["seed"], "code": record["software"].get("git"), "originated": dict(originated),
            "transmissions": transmissions}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path, help="an ns-2 trace file, or a results directory of lab runs with aodvd")
    parser.add_argument("--sources", nargs="+",
                        help="the flows' sources: ns-2 node numbers for a trace, node names for a directory")
    parser.add_argument("--attempts", action="store_true",
                        help="count the originated RREQs by their attempt instead of the floods by originator")
    parser.add_argument("--window", nargs=2, type=float, default=(0.0, float("inf")), metavar=("START", "END"),
                        help="with --attempts: only RREQs sent in this window, seconds of the run (default: all)")
    args = parser.parse_args()
    if not args.attempts and not args.sources:
        parser.error("--sources is needed to split the floods by originator (or give --attempts)")
    window = tuple(args.window)
    if args.path.is_file():
        if args.attempts:
            print(json.dumps(ns2_attempts(args.path, window)))
        else:
            print(json.dumps(ns2_floods(args.path, {int(s) for s in args.sources}), indent=1))
        return
    records = ResultsDir(args.path).driver_records("lab")
    if not records:
        parser.error(f"{args.path}: no lab runs recorded")
    for record in records:
        if args.attempts:
            print(json.dumps({"seed": record["seed"], "code": record["software"].get("git"),
                              "attempts": lab_attempts(args.path, record, window)}))
        else:
            print(json.dumps(lab_floods(args.path, record, set(args.sources))))


if __name__ == "__main__":
    main()
