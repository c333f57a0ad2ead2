"""Lab backends: how the nodes attach to the medium, one class per
`backend.kind` of a topology (Topology.backend), registered in `BACKENDS`.
lab.py calls them in this order: `check` before anything is created,
`medium_argv` to start the medium, `wait_attached` once the medium is ready.
A new backend is a class with these three methods (beside `HwsimLabBackend` in
hwsim.py), listed here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from .hwsim import HwsimLabBackend
from .pluginapi import PluginLab


class LabBackend(Protocol):
    def check(self) -> None:
        """Refuses, with the reason, when this host cannot run the backend."""

    def medium_argv(self, program: Path, lab_file: Path) -> list[str]:
        """`meshemu-medium`'s command line for the lab."""

    def wait_attached(self, lab: PluginLab, timeout: float | None) -> None:
        """Returns once every node can send (after the medium's ready line)."""


class TapLabBackend:
    """`backend: tap`, the default: a TAP per node and our own MAC in the
    medium (emulator/README.md section 4); the ready line is the whole wait."""

    def __init__(self, settings: dict[str, Any]):
        self.settings = settings

    def check(self) -> None:
        pass

    def medium_argv(self, program: Path, lab_file: Path) -> list[str]:
        return [str(program), "tap", "--config", str(lab_file)]

    def wait_attached(self, lab: PluginLab, timeout: float | None) -> None:
        pass


BACKENDS: dict[str, type[LabBackend]] = {"tap": TapLabBackend, "hwsim": HwsimLabBackend}


def backend_of(settings: dict[str, Any]) -> LabBackend:
    """The backend of a topology's `backend` settings ({"kind": ..., ...})."""
    return BACKENDS[settings["kind"]](settings)
