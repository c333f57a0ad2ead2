"""Logs, beside one lab run, every node's neighbour-table changes and the
ARP frames and drops on its air, with their times, to set beside what a
flow did (its TCP timeouts in the run's tcp_info samples, aodvd's link
breaks in its events):

    python experiments/validation/ns2/arp_watch.py OUT_DIR &
    meshemu run FILE --only ... --set "seeds=[1]" --out DIR
    wait

Waits for the next lab to come up (a new control socket under
/run/meshemu), runs `ip -ts monitor neigh` in each of its nodes'
namespaces, subscribes to the medium's `tx` and `drop` events
(emulator/README.md §6), and, when the lab goes down, stops the monitors
and writes OUT_DIR/neighbours.jsonl (`{"wall_s", "node", "address",
"state"}` per change the kernel announced: STALE, PROBE, REACHABLE,
FAILED, ...; a move to DELAY is not announced) and OUT_DIR/frames.jsonl
(the medium's events of 28-byte frames sent, ARP's, and of every drop,
as it sends them). The run's `clock.json` puts both on its time line:
`run_t0_wall_ns` is its time 0 on the wall clock, and an event's
`time_ns` (model time) is `model_t0_wall_ns + time_ns` there.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable, Iterator

from frame_lengths import control_sockets, next_lab, subscription  # this script's directory is on the path

ARP_LENGTH = 28


def neighbour_changes(node: str, lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """`ip -ts monitor neigh` lines (`[2026-11-30T11:10:39.817171] 10.0.0.5
    dev wlan0 lladdr 02:00:00:00:00:05 STALE`, `Deleted` first for a
    removal) as changes; lines of another shape are skipped."""
    for line in lines:
        if not line.startswith("[") or "]" not in line:
            continue
        stamp, rest = line[1:].split("]", 1)
        fields = rest.split()
        if len(fields) < 2:
            continue
        deleted = fields[0] == "Deleted"
        address = fields[1] if deleted else fields[0]
        yield {"wall_s": datetime.datetime.fromisoformat(stamp).timestamp(), "node": node, "address": address,
               "state": "DELETED" if deleted else fields[-1]}


def kept(event: dict[str, Any]) -> bool:
    """ARP frames sent and every drop."""
    return event.get("event") == "drop" or (event.get("event") == "tx" and event.get("len") == ARP_LENGTH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="directory for neighbours.jsonl and frames.jsonl")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for a lab (600)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    lab = next_lab(control_sockets(), args.timeout)
    time.sleep(0.5)  # the medium listens a moment after it creates the socket
    config = json.loads((lab.parent / "LAB.json").read_text())
    monitors = {}
    for entry, node in zip(config["nodes"], config["medium"]["nodes"]):
        log = tempfile.TemporaryFile("w+")
        monitors[node["name"]] = (subprocess.Popen(["ip", "-ts", "-n", entry["netns"], "monitor", "neigh"],
                                                   stdout=log), log)
    try:
        kept_events = [event for event in subscription(lab, ["tx", "drop"]) if kept(event)]
    finally:  # the monitors stop with the lab, or when the medium's events were lost
        for monitor, _ in monitors.values():
            monitor.terminate()
            monitor.wait()
    changes = []
    for node, (_, log) in monitors.items():
        log.seek(0)
        changes += neighbour_changes(node, log)
        log.close()
    changes.sort(key=lambda change: change["wall_s"])
    (args.out / "neighbours.jsonl").write_text("".join(json.dumps(change) + "\n" for change in changes))
    (args.out / "frames.jsonl").write_text("".join(json.dumps(event) + "\n" for event in kept_events))


if __name__ == "__main__":
    main()
