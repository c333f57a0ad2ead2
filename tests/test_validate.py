"""`meshemu validate`: what it says of runs this machine cannot carry out."""

from __future__ import annotations

import pytest

from meshemu.cli.files import validate_file
from meshemu.errors import ConfigError
from meshemu.experiment import plan, runs

EXPERIMENT = """\
topology: {generate: {kind: chain, n: 3, spacing: 200m}}
duration: 10s
seeds: [1, 2]
traffic:
  - {kind: tcp, src: n0, dst: n2, cc: reno}
"""


@pytest.fixture(autouse=True)
def kernel_without_vegas(monkeypatch):
    monkeypatch.setattr(plan, "kernel_congestion_controls", lambda: ["reno", "cubic"])


def test_runs_this_kernel_cannot_carry_out_are_named_with_where_they_run(write):
    file = write("e.yaml", EXPERIMENT + "sweep:\n  traffic.0.cc: [reno, vegas]\n")
    summary, notes = validate_file(str(file))
    assert summary == "experiment file, 2 runs (2 skipped)"
    assert notes == [
        f"skipped (2 runs): {file}:7:24: sweep.traffic.0.cc[1]: congestion control 'vegas' is not available in this "
        "kernel; net.ipv4.tcp_available_congestion_control: reno cubic",
        f"those run where the kernel has them, such as the VM (every congestion control Debian ships): "
        f"meshemu vm -- meshemu validate {file}"]


def test_a_file_only_the_vm_runs_validates_and_says_so(write):
    file = write("e.yaml", EXPERIMENT.replace("cc: reno", "cc: vegas") + "scales:\n  long: {duration: 20s}\n")
    summary, notes = validate_file(str(file))
    assert summary == "experiment file, no run on this machine; scale long: no run on this machine"
    assert notes[0].startswith("skipped (4 runs): ") and "congestion control 'vegas' is not available" in notes[0]
    assert notes[1].endswith(f"meshemu vm -- meshemu validate {file}")


def test_a_file_no_driver_can_run_is_still_an_error(write):
    """ns-2 has no cubic: a file of cubic runs only is an error for it."""
    file = write("e.yaml", EXPERIMENT.replace("cc: reno", "cc: cubic"))
    with pytest.raises(ConfigError, match="cubic"):
        validate_file(str(file), runs.NS2)


def test_other_mistakes_beside_a_missing_congestion_control_are_errors(write):
    file = write("e.yaml", EXPERIMENT.replace("cc: reno", "cc: vegas").replace("dst: n2", "dst: n9"))
    with pytest.raises(ConfigError) as caught:
        validate_file(str(file))
    assert any("unknown node 'n9'" in problem.message for problem in caught.value.problems)
