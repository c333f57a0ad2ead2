"""Counts, for each lab run of results directories, the links aodvd broke
by cause, from every node's events (`routing/<node>.aodv-events.jsonl`),
and how many of those broken on a failed address resolution had carried a
route for a while:

    python experiments/validation/ns2/link_breaks.py DIR [DIR ...]

A neighbour entry the kernel is resolving for the first time fails within
about 3 s of the first packet (3 broadcast requests a second apart), so a
failure on a link a node has routed through for `RESOLVED_AFTER_S` or more
is of an entry resolved before: one gone stale whose unicast probes were
not answered. ns-2's ARP never probes (its entries never expire), so only
the first kind has a counterpart there (routing/aodv/NS2.md, §2).

One line per run: its parameters, seed, code, whether it was behind real
time, the breaks by cause, and the failed resolutions of links in use.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from meshemu.experiment.results import ResultsDir

# Longer than a first resolution can take (3 requests, 1 s apart) by a
# margin, and as short as Linux's shortest reachable time (half of 30 s).
RESOLVED_AFTER_S = 15.0
RESOLUTION = "address resolution"


def run_breaks(run_dir: Path) -> tuple[collections.Counter, int]:
    """Breaks by cause over every node's events, and how many of the failed
    resolutions broke a link routed through for RESOLVED_AFTER_S or more."""
    causes: collections.Counter = collections.Counter()
    resolved_before = 0
    for events in sorted((run_dir / "routing").glob("*.aodv-events.jsonl")):
        # When each neighbour became a next hop, since its link last broke.
        next_hop_since: dict[str, float] = {}
        for line in events.read_text().splitlines():
            event = json.loads(line)
            seconds = event["mono_ns"] / 1e9
            if event["event"] in ("route_added", "route_updated") and event.get("next_hop"):
                next_hop_since.setdefault(event["next_hop"], seconds)
            elif event["event"] == "link_broken":
                causes[event["cause"]] += 1
                since = next_hop_since.pop(event["neighbor"], None)
                if event["cause"] == RESOLUTION and since is not None and seconds - since >= RESOLVED_AFTER_S:
                    resolved_before += 1
    return causes, resolved_before


def run_line(out: Path, record: dict) -> str:
    causes, resolved_before = run_breaks(out / "runs" / record["run_id"])
    params = " ".join(f"{key}={value}" for key, value in record["params"].items())
    breaks = ", ".join(f"{cause} {count}" for cause, count in sorted(causes.items())) or "none"
    return (f"{params} seed {record['seed']} {record['software'].get('git')} "
            f"{'behind real time' if record['behind_real_time'] else 'in time'}: link breaks {breaks}; "
            f"failed resolutions on a link in use {RESOLVED_AFTER_S:.0f} s or more {resolved_before}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, nargs="+", help="results directories of meshemu run (lab runs)")
    for out in parser.parse_args().out:
        records = ResultsDir(out).driver_records("lab")
        if not records:
            parser.error(f"{out}: no lab runs recorded")
        for record in records:
            print(run_line(out, record))


if __name__ == "__main__":
    main()
