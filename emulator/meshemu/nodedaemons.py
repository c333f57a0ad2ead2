"""What the routing and queueing plug-ins (routing.py, queueing.py) share
about the daemons they run in every node: the node's directory for the
daemon's files, and waiting until every daemon of a lab is ready.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .errors import LabError
from .pluginapi import PluginLab, PluginProcess

READY_TIMEOUT = 20.0  # seconds a daemon may take to be ready after the one before it


def node_dir(lab: PluginLab, name: str) -> Path:
    """`run_dir/nodes/<name>/`, made if missing: a node's daemon files, logs and counters."""
    path = lab.run_dir / "nodes" / name
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass
class Started:
    """A daemon spawned in a node, ready once `ready_file` exists."""

    node: str
    process: PluginProcess
    ready_file: Path
    log: Path


def wait_until_ready(started: list[Started]) -> None:
    """Until every daemon's ready file exists. The daemons of a large lab
    come up side by side, so each gets READY_TIMEOUT from when the one
    before it was ready rather than one deadline for all. A daemon that
    exits first, or is not ready in time, is a LabError with its log's tail."""
    for daemon in started:
        deadline = time.monotonic() + READY_TIMEOUT
        while not daemon.ready_file.exists():
            status = daemon.process.poll()
            if status is not None or time.monotonic() > deadline:
                tail = daemon.log.read_text(errors="replace").strip()[-1500:] if daemon.log.exists() else ""
                what = (f"exited with status {status}" if status is not None
                        else f"was not ready after {READY_TIMEOUT:.0f} s")
                raise LabError(f"{Path(daemon.process.argv[0]).name} on {daemon.node} {what}: {tail or '(no output)'}")
            time.sleep(0.01)
