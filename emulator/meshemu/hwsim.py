"""The hwsim backend of labs (`backend: hwsim` in a topology).

Every node gets a mac80211_hwsim radio and the kernel's own 802.11 stack;
`meshemu-medium hwsim` creates the radios, joins them to one IBSS (or 802.11s
mesh) and decides every frame with the model (emulator/README.md section 7).
This module checks that the kernel can do it, builds the medium's command
line and waits until every node has joined. The backend agreement
benchmark is `python -m meshemu.bench.hwsim`.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from .errors import LabError
from .pluginapi import PluginLab

MODULE = "mac80211_hwsim"
VM_HINT = "run the command inside the VM mode: meshemu vm -- <the meshemu command or your script>"


def in_vm() -> bool:
    """Whether this is the guest of `meshemu vm` (virtme-ng's kernel command line)."""
    try:
        return "virtme" in Path("/proc/cmdline").read_text()
    except OSError:
        return False


def check_kernel(backend: dict[str, Any]) -> None:
    """Loads mac80211_hwsim without radios of its own if needed; a clear
    error, pointing to the VM mode, where the kernel cannot."""
    if backend.get("vm") and not in_vm():
        raise LabError(f"the topology asks for the VM (backend.vm: true) and a lab cannot outlive it: {VM_HINT}")
    if Path("/sys/module", MODULE).is_dir():
        return
    try:
        result = subprocess.run(["modprobe", MODULE, "radios=0"], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise LabError(f"this kernel has no {MODULE} loaded and modprobe is missing: {VM_HINT}") from None
    if result.returncode != 0:
        detail = result.stderr.strip().splitlines()[-1:] or [f"exit {result.returncode}"]
        raise LabError(f"this kernel has no {MODULE} ({detail[0]}): {VM_HINT}")


class HwsimLabBackend:
    """`backend: hwsim` (backends.py): settings {"kind", "mode", "ssid",
    "frequency_mhz", "vm"} as the topology resolves them."""

    def __init__(self, settings: dict[str, Any]):
        self.settings = settings

    def check(self) -> None:
        check_kernel(self.settings)

    def medium_argv(self, program: Path, lab_file: Path) -> list[str]:
        """`meshemu-medium hwsim` for a lab."""
        return [str(program), "hwsim", "--config", str(lab_file), "--mode", self.settings["mode"],
                "--ssid", self.settings["ssid"], "--frequency-mhz", str(self.settings["frequency_mhz"])]

    def wait_attached(self, lab: PluginLab, timeout: float | None) -> None:
        wait_joined(lab, self.settings["mode"], timeout if timeout is not None else 30.0 + 0.5 * len(list(lab)))


def _joined(lab: PluginLab, node: str, mode: str) -> bool:
    if mode == "ibss":
        result = lab[node].run(["iw", "dev", "wlan0", "link"], timeout=30)
        return "Joined IBSS" in result.stdout
    # A mesh point is in the mesh once it has a peer link (or has no neighbour at all).
    result = lab[node].run(["iw", "dev", "wlan0", "station", "dump"], timeout=30)
    return "plink state:\tESTAB" in result.stdout


def wait_joined(lab: PluginLab, mode: str, timeout: float) -> None:
    """Returns once every node's radio has joined the cell."""
    deadline = time.monotonic() + timeout
    names = [node.name for node in lab]
    waiting = names
    if mode == "mesh":
        links = (lab.ready or {}).get("links", [])
        with_neighbours = {names[link["a"]] for link in links if link.get("in_rx_range")}
        waiting = [name for name in waiting if name in with_neighbours]
    while waiting:
        waiting = [name for name in waiting if not _joined(lab, name, mode)]
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise LabError(f"hwsim radios of {', '.join(waiting[:5])} did not join the {mode} cell within "
                           f"{timeout:.0f} s")
        time.sleep(0.2)
