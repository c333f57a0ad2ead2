"""Sums, for each lab run of a results directory, what aodvd sent and broke
over the whole run (every node's `aodv.json`) beside the medium's counters
over the window, to set beside ns-2's AODV lines:

    python experiments/validation/ns2/aodv_counts.py DIR

One line per run: seed, code, whether it was behind real time, RREQ / RERR /
RREP transmissions, link breaks, frames dropped at the retry limit, queued
packets flushed with a failure (`link_drops`), CTS per RTS, and the flows'
goodput summed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from meshemu.experiment.results import ResultsDir

MESSAGES = ("rreq", "rerr", "rrep")


def run_counts(out: Path, record: dict) -> str:
    sent = dict.fromkeys(MESSAGES, 0)
    breaks = 0
    for path in sorted((out / "runs" / record["run_id"] / "routing").glob("*.aodv.json")):
        status = json.loads(path.read_text())
        for message in MESSAGES:
            # A node lists only the kinds it sent.
            sent[message] += status["control_sent"].get(message, {}).get("packets", 0)
        breaks += status["link_breaks"]
    medium = record["metrics"]["medium"]["total"]
    goodput = sum(flow["goodput_bps"] for flow in record["metrics"]["flows"]) / 1e3
    return (f"seed {record['seed']} {record['software'].get('git')} "
            f"{'behind real time' if record['behind_real_time'] else 'in time'}: "
            f"RREQ/RERR/RREP {'/'.join(str(sent[m]) for m in MESSAGES)}, link breaks {breaks}, "
            f"retry drops {medium['retry_drops']}, link drops {medium['link_drops']}, "
            f"CTS per RTS {medium['cts_sent'] / max(medium['rts_attempts'], 1):.2f}, goodput {goodput:.0f} kbit/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a results directory of meshemu run (lab runs with aodvd)")
    out = parser.parse_args().out
    records = ResultsDir(out).driver_records("lab")
    if not records:
        parser.error(f"{out}: no lab runs recorded")
    for record in records:
        print(run_counts(out, record))


if __name__ == "__main__":
    main()
