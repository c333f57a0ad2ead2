"""Backend agreement: UDP saturation throughput of a chain under
ns2-wavelan, the TAP backend against hwsim, on the same host (the VM here:
this kernel has no mac80211_hwsim).

    meshemu vm -- python -m meshemu.bench.hwsim [--hops 1 2 3 4] [--seconds 10] [--runs 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from ..errors import MeshemuError
from ..hwsim import check_kernel
from ..lab import Lab
from ..topology import load_topology

AGREEMENT_TOPOLOGY = """\
name: {name}
profile: ns2-wavelan
backend: {backend}
generate: {{kind: chain, n: {n}, spacing: 200m}}
"""
BACKENDS = ("tap", "hwsim")
# Counters of the source that tell why a backend carries what it carries.
SOURCE_COUNTERS = ("data_attempts", "tx_data_frames", "retry_drops", "queue_drops", "tx_broadcast_frames")


@dataclass
class Sample:
    backend: str
    hops: int
    run: int
    kbps: float
    lateness_p99_ns: int | None
    lateness_max_ns: int | None
    source: dict[str, int]


def saturation_run(backend: str, hops: int, seconds: int, offered: str, directory: Path, run: int) -> Sample:
    """One lab: iperf3 UDP at `offered` (above what the chain carries) from n0
    to n<hops>; the receiver's throughput, the medium's lateness and the
    source's counters."""
    path = directory / f"{backend}{hops}-{run}.yaml"
    path.write_text(AGREEMENT_TOPOLOGY.format(name=f"agree-{backend}", backend=backend, n=hops + 1))
    report_path = directory / f"{backend}{hops}-{run}.json"
    with Lab(load_topology(path)) as lab, open(report_path, "w") as report_file:
        sink = lab[f"n{hops}"]
        server = sink.spawn(["iperf3", "-s", "-1", "-J"], stdout=report_file)
        time.sleep(1.0)
        lab["n0"].run(["iperf3", "-c", sink.ip, "-u", "-b", offered, "-l", "1460", "-t", str(seconds)],
                      timeout=seconds + 120, check=True)
        lateness = lab.control("lateness")
        source = lab.stats("n0")["n0"]
        server.wait(timeout=60)
    return Sample(backend, hops, run, received_kbps(json.loads(report_path.read_text())),
                  lateness.get("p99_ns"), lateness.get("max_ns"), {k: int(source[k]) for k in SOURCE_COUNTERS})


def received_kbps(server_report: dict[str, Any]) -> float:
    """What arrived, from an iperf3 UDP server's JSON report: its `end.sum`
    counts the bytes it sent (none), `end.sum_received` those it received."""
    return float(server_report["end"]["sum_received"]["bits_per_second"]) / 1e3


def ratio_text(hwsim_kbps: float, tap_kbps: float) -> str:
    """hwsim/tap, or what it means when TAP carried nothing."""
    if tap_kbps > 0:
        return f"{hwsim_kbps / tap_kbps:.2f}"
    return "both 0" if hwsim_kbps == 0 else "tap 0"


def table(samples: list[Sample]) -> list[str]:
    """Min / median / max per backend and chain length, the ratio of the
    medians and the worst lateness p99 of the runs."""
    lines = [f"{'hops':>4} | {'tap kbit/s min/med/max':>22} | {'hwsim kbit/s min/med/max':>24} | hwsim/tap | "
             f"lateness p99 tap/hwsim (max of runs)"]
    for hops in sorted({s.hops for s in samples}):
        cells, medians, late = {}, {}, {}
        for backend in BACKENDS:
            values = [s.kbps for s in samples if s.backend == backend and s.hops == hops]
            p99s = [s.lateness_p99_ns for s in samples if s.backend == backend and s.hops == hops
                    and s.lateness_p99_ns is not None]
            medians[backend] = statistics.median(values) if values else 0.0
            cells[backend] = (f"{min(values):6.0f} {medians[backend]:6.0f} {max(values):6.0f}" if values else "-")
            late[backend] = f"{max(p99s) / 1e3:.0f} us" if p99s else "-"
        lines.append(f"{hops:>4} | {cells['tap']:>22} | {cells['hwsim']:>24} | "
                     f"{ratio_text(medians['hwsim'], medians['tap']):>9} | {late['tap']} / {late['hwsim']}")
    return lines


def agreement(hops_list: Sequence[int], seconds: int, runs: int, offered: str, json_path: Path | None) -> None:
    """Prints one line per run, then the table. The backends alternate run
    by run, so a slow spell of the host weighs on both."""
    print(f"UDP saturation ({offered} offered, 1460-byte datagrams), ns2-wavelan chain, {seconds} s per run, "
          f"{runs} runs", flush=True)
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory() as directory:
        for hops in hops_list:
            for run in range(runs):
                for backend in BACKENDS:
                    sample = saturation_run(backend, hops, seconds, offered, Path(directory), run)
                    samples.append(sample)
                    late = (f"{sample.lateness_p99_ns / 1e3:.0f}/{(sample.lateness_max_ns or 0) / 1e3:.0f} us"
                            if sample.lateness_p99_ns is not None else "-")
                    counters = " ".join(f"{k}={v}" for k, v in sample.source.items())
                    print(f"  {hops} hops {backend:>5} run {run}: {sample.kbps:7.1f} kbit/s, lateness p99/max "
                          f"{late}; n0 {counters}", flush=True)
                    if json_path is not None:
                        json_path.write_text(json.dumps([asdict(s) for s in samples], indent=1) + "\n")
    print("\n".join(table(samples)), flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshemu.bench.hwsim", description="Backend agreement: UDP "
                                     "saturation throughput of ns2-wavelan chains, TAP against hwsim (run it in "
                                     "a kernel with mac80211_hwsim: meshemu vm -- python -m meshemu.bench.hwsim).")
    parser.add_argument("--hops", type=int, nargs="+", default=[1, 2, 3, 4], help="chain lengths (default 1 2 3 4)")
    parser.add_argument("--seconds", type=int, default=10, help="iperf3 duration per run (default 10)")
    parser.add_argument("--runs", type=int, default=3, help="runs per backend and chain length (default 3)")
    parser.add_argument("--offered", default="2M", help="iperf3 -b, above the chain's capacity (default 2M)")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's figures there")
    args = parser.parse_args(argv)
    if any(h < 1 for h in args.hops) or args.seconds < 1 or args.runs < 1:
        parser.error("--hops, --seconds and --runs must be at least 1")
    try:
        check_kernel({})
        agreement(args.hops, args.seconds, args.runs, args.offered, args.json)
    except MeshemuError as exc:
        print(f"meshemu hwsim: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
