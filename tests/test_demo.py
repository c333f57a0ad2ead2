"""`meshemu demo`, shortened to one hop count (root)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO
from meshemu.experiment.results import read_records

pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_demo_runs_chain7_and_prints_the_table(tmp_path):
    out = tmp_path / "demo"
    result = subprocess.run([sys.executable, "-m", "meshemu", "demo", "--only", "dst=n2", "--out", str(out)],
                            capture_output=True, text=True, timeout=300, cwd=REPO)
    assert result.returncode == 0, result.stderr
    [record] = read_records(out / "runs.jsonl")
    tcp, udp = record["metrics"]["flows"]
    assert (tcp["kind"], tcp["dst"], tcp["hops"], udp["kind"], udp["hops"]) == ("tcp", "n2", 2, "udp", 2)
    assert tcp["goodput_bps"] > 0.1e6 and udp["goodput_bps"] > 0.3e6
    lines = result.stdout.splitlines()
    assert any("seed 1" in line for line in lines)
    assert any("RTT ms" in line for line in lines) and any("rdrop" in line for line in lines)
    row = next(line.split() for line in lines if line.split()[:1] == ["2"])
    assert row[1] == f"{tcp['goodput_bps'] / 1e6:.3f}" and row[4] == f"{udp['goodput_bps'] / 1e6:.3f}"
