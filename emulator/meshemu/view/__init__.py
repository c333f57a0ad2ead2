"""`meshemu view`: a live view of a lab in the browser, or the replay of a
recorded run (README.md here)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Callable

from ..lab import Lab


def serve_lab(lab_name: str | None, port: int, flows: list[str], capture_dir: Path,
              say: Callable[[str], None]) -> None:
    """Serve the view of a lab that is up until Ctrl-C."""
    from .flows import named_flows
    from .live import LiveSource
    from .server import ViewServer

    lab = Lab.attach(lab_name)
    server = ViewServer(LiveSource(lab, named_flows(flows, list(lab.nodes)), capture_dir), port)
    asyncio.run(server.serve(lambda url: say(f"view of lab {lab.name}: {url}  (Ctrl-C stops it)")))


def serve_replay(results: Path, run_id: str, port: int, say: Callable[[str], None]) -> None:
    """Serve the replay of a recorded run until Ctrl-C."""
    from .replay import ReplaySource, recording_of
    from .server import ViewServer

    name = f"{results.resolve().name} run {run_id}"
    server = ViewServer(ReplaySource(recording_of(results, run_id), name), port)
    asyncio.run(server.serve(lambda url: say(f"replay of {name}: {url}  (Ctrl-C stops it)")))
