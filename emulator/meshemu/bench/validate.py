"""Time `meshemu validate` on every shipped file (or the files given), or
on hostile files it must refuse fast.

    python -m meshemu.bench.validate [FILE ...] [--runs 3] [--timeout 900]
    python -m meshemu.bench.validate --hostile [--runs 3]

Each file is validated `--runs` times, each time in a fresh process (as a
user runs it: imports, every scale planned, `meshemu-medium` asked about
placements); prints min/median/max of the wall-clock time and whether it
passed, failed (the first problem) or ran out of time. `--hostile` writes
the hostile files of issue 19 into a temporary directory and times those.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[3]


def shipped_files() -> list[Path]:
    """Every topology preset and experiment file in the repository."""
    files = sorted((REPOSITORY / "topologies").glob("*.yaml")) + sorted((REPOSITORY / "experiments").rglob("*.yaml"))
    return [file.relative_to(REPOSITORY) for file in files]


def alias_bomb(per_level: int = 9, levels: int = 7) -> str:
    """Each level a list of `per_level` aliases of the one before: 2 KB of
    text that expands to per_level ** levels values."""
    lines = [f"l0: &l0 [{', '.join(['x'] * per_level)}]"]
    for level in range(1, levels + 1):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * per_level)}]")
    return "\n".join(lines) + "\n"


EXPERIMENT = """\
topology: {generate: {kind: chain, n: 3, spacing: 200m}}
duration: 10s
traffic:
  - {kind: udp, src: n0, dst: n2, rate: 100kbps, packet: 500B}
"""


def hostile_files(directory: Path) -> list[Path]:
    """The hostile files of issue 19, written into `directory`."""
    texts = {
        "alias-bomb.yaml": alias_bomb(),
        "deep-nesting.yaml": "a: " + "[" * 100_000 + "]" * 100_000 + "\n",
        "one-megabyte.yaml": "# padding\n" * 100_000,
        "fifty-thousand-values.yaml": "a: [" + ", ".join(["1"] * 50_000) + "]\n",
        "million-nodes.yaml": "generate: {kind: chain, n: 1000000, spacing: 200m}\n",
        "nan-exponent.yaml": "generate: {kind: chain, n: 3, spacing: 200m}\n"
                             "radio: {propagation: {model: log_distance, exponent: .nan, reference_distance: 1m}}\n",
        "huge-rate.yaml": EXPERIMENT.replace("100kbps", "1e20Mbps"),
        "zero-duration.yaml": EXPERIMENT.replace("10s", "0s"),
        "negative-duration.yaml": EXPERIMENT.replace("10s", "-10s"),
        "huge-sweep.yaml": EXPERIMENT + "repetitions: 100\nsweep:\n" + "".join(
            f"  traffic.0.{key}: [{', '.join(values)}]\n" for key, values in (
                ("rate", [f"{rate}kbps" for rate in range(1, 101)]),
                ("packet", [f"{size}B" for size in range(100, 200)]),
                ("port", [str(port) for port in range(2000, 2100)]))),
    }
    files = []
    for name, text in texts.items():
        (directory / name).write_text(text)
        files.append(directory / name)
    for name, data in (("latin-1.yaml", "name: caf\xe9\n".encode("latin-1")), ("binary.yaml", b"\x7fELF\x02\x00")):
        (directory / name).write_bytes(data)
        files.append(directory / name)
    for name, device in (("dev-zero.yaml", "/dev/zero"), ("dev-urandom.yaml", "/dev/urandom")):
        (directory / name).symlink_to(device)
        files.append(directory / name)
    os.mkfifo(directory / "fifo.yaml")
    (directory / "directory.yaml").mkdir()
    return files + [directory / "fifo.yaml", directory / "directory.yaml"]


def validate_once(file: Path, timeout: float) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        result = subprocess.run([sys.executable, "-m", "meshemu", "validate", str(file)], cwd=REPOSITORY,
                                capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - started, f"timeout after {timeout:g} s"
    elapsed = time.perf_counter() - started
    if result.returncode == 0:
        return elapsed, "ok"
    first_problem = (result.stderr.strip().splitlines() or ["no output"])[0]
    return elapsed, f"failed: {first_problem}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshemu.bench.validate", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="default: topologies/*.yaml and experiments/**/*.yaml")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--hostile", action="store_true", help="time the hostile files instead")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="meshemu-hostile-") as directory:
        files = hostile_files(Path(directory)) if args.hostile else args.files or shipped_files()
        report(files, args.runs, args.timeout)
    return 0


def report(files: list[Path], runs: int, timeout: float) -> None:
    print(f"{'file':48} {'min s':>7} {'median':>7} {'max s':>7}  outcome", flush=True)
    for file in files:
        times, outcomes = [], []
        for _ in range(runs):
            elapsed, outcome = validate_once(file, timeout)
            times.append(elapsed)
            outcomes.append(outcome)
        shown = outcomes[0] if len(set(outcomes)) == 1 else " | ".join(outcomes)
        name = file.name if file.is_relative_to(tempfile.gettempdir()) else str(file)
        print(f"{name:48} {min(times):7.2f} {statistics.median(times):7.2f} {max(times):7.2f}  {shown[:150]}",
              flush=True)


if __name__ == "__main__":
    sys.exit(main())
