"""The command line's own rules: which commands take a command after --."""

from __future__ import annotations

import subprocess
import sys

from conftest import REPO


def meshemu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "meshemu", *args], capture_output=True, text=True, cwd=REPO,
                          check=False)


def test_vm_without_a_command_says_how_to_give_one():
    result = meshemu("vm")
    assert result.returncode == 1
    assert "after --, e.g. meshemu vm -- meshemu run" in result.stderr


def test_only_exec_and_vm_take_a_command_after_the_double_dash():
    result = meshemu("validate", "topologies/chain7.yaml", "--", "ls")
    assert result.returncode == 2 and "only exec and vm take a command after --" in result.stderr
