"""`meshemu demo`: experiments/demo.yaml run by the runner, then one table
per hop count: TCP goodput and RTT, UDP goodput, delay and loss, and what
the MAC went through (RTS attempts, retry drops, backoffs, busy time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from ..errors import MeshemuError
from .plan import Plan
from .results import ResultsDir

DEMO_FILE = Path(__file__).resolve().parents[3] / "experiments" / "demo.yaml"


def demo_file() -> Path:
    if not DEMO_FILE.is_file():
        raise MeshemuError(f"the demo experiment {DEMO_FILE} is missing (the demo runs from a source tree)")
    return DEMO_FILE


def _flow(record: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((flow for flow in record["metrics"]["flows"] if flow["kind"] == kind), {})


def _ms(spread: dict[str, Any] | None, key: str = "mean") -> str:
    if not spread or spread.get(key) is None:
        return "-"
    return f"{spread[key]:.1f}" if spread[key] < 100 else f"{spread[key]:.0f}"


def table(results_dir: Path, plan: Plan) -> Table:
    ids = {run.run_id for run in plan.runs}
    records = [record for record in ResultsDir(results_dir).records() if record["run_id"] in ids]
    records.sort(key=lambda record: (_flow(record, "tcp").get("hops") or 0, record["seed"]))
    seeds = sorted({record["seed"] for record in records})
    table = Table(title=f"{plan.description or plan.name}\nseed {', '.join(map(str, seeds))}", box=box.SIMPLE_HEAD,
                  caption="Mbit/s: goodput over the flow's window; RTT: TCP's smoothed RTT; delay: UDP one-way, "
                          "median; MAC figures over the whole run, all nodes: RTS sent, rdrop: frames dropped at "
                          "the retry limit, bkoff/s: random backoffs per second, busy: mean busy time")
    table.pad_edge = False
    table.collapse_padding = True
    for column in ("hops", "TCP\nMbit/s", "TCP\nRTT ms", "TCP\nretx", "UDP\nMbit/s", "UDP\ndelay ms", "UDP\nloss",
                   "RTS", "rdrop", "bkoff\n/s", "busy"):
        table.add_column(column, justify="right", no_wrap=True)
    late = []
    for record in records:
        tcp, udp = _flow(record, "tcp"), _flow(record, "udp")
        total = record["metrics"]["medium"]["total"]
        loss = udp.get("loss")
        table.add_row(
            str(tcp.get("hops", udp.get("hops", "-"))),
            f"{tcp['goodput_bps'] / 1e6:.3f}" if "goodput_bps" in tcp else "-",
            _ms(tcp.get("rtt_ms")), str(tcp.get("retransmits", "-")),
            f"{udp['goodput_bps'] / 1e6:.3f}" if "goodput_bps" in udp else "-",
            _ms(udp.get("delay_ms"), "p50"), "-" if loss is None else f"{100 * loss:.1f}%",
            str(total["rts_attempts"]), str(total["retry_drops"]), f"{total['backoffs_per_s']:.0f}",
            f"{100 * total['busy_fraction']:.0f}%",
        )
        if record.get("behind_real_time"):
            late.append(str(tcp.get("hops", "?")))
    if late:
        table.caption += (f". The medium fell behind real time in the runs over {', '.join(late)} hops "
                          "(a busy machine): their figures are less exact")
    return table
