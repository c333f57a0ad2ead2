"""`meshemu vm`: a command in a VM with Debian's stock kernel."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import vm
from .common import AddCommand


def register(command: AddCommand) -> None:
    sub = command("vm", _vm, "run a command in a VM with Debian's stock kernel (mac80211_hwsim, every TCP "
                             "congestion control): meshemu vm -- meshemu run exp.yaml")
    vm.add_arguments(sub)
    sub.set_defaults(argv=[])


def _vm(args: argparse.Namespace) -> int:
    command = args.argv
    # The guest's PATH is the caller's, which may not hold the venv: run our own program by its interpreter.
    if command[:1] == ["meshemu"]:
        command = [sys.executable, "-m", "meshemu", *command[1:]]
    return run_in_vm(command, args.memory, args.cpus, args.rw)


def run_in_vm(command: list[str], memory: str, cpus: int | None, writable: list[str]) -> int:
    return vm.run(command, shared=[Path(d) for d in writable], memory=memory, cpus=cpus)
