"""Shared fixtures. Tests marked `root` need root and network namespaces."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parent.parent
TOPOLOGIES = REPO / "topologies"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """write("x.yaml", text) -> the path of a new file in the test's directory."""

    def writer(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return writer


def range_links(reach_m: float) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A links report that puts node pairs closer than `reach_m` in receive
    range: tests the control plane's logic without the radio model."""

    def links(config: dict[str, Any]) -> dict[str, Any]:
        nodes = config["nodes"]
        report = []
        for a, first in enumerate(nodes):
            for b, second in enumerate(nodes):
                if a != b:
                    close = math.dist(first["position"], second["position"]) <= reach_m
                    report.append({"a": a, "b": b, "rx_power_dbm": 0.0, "in_rx_range": close, "in_cs_range": close})
        return {"nodes": len(nodes), "links": report}

    return links


def namespaces() -> set[str]:
    result = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in result.stdout.splitlines() if line.strip()}


def ctrl_c_reaches() -> None:
    """preexec_fn for a child a test sends Ctrl-C: SIGINT as in a foreground
    program. A shell without job control starts background jobs (as CI
    runners may start the suite) with SIGINT ignored, and children inherit
    that, so the signal would never arrive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def reaped(process: subprocess.Popen) -> Iterator[subprocess.Popen]:
    """The process, killed and waited for if the test leaves it running
    (a failed assertion while it runs)."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
