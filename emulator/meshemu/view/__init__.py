"""`meshemu view`: a live view of a lab in the browser (README.md here)."""

from __future__ import annotations

import asyncio
from typing import Callable

from ..lab import Lab


def serve_lab(lab_name: str | None, port: int, say: Callable[[str], None]) -> None:
    """Serve the view of a lab that is up until Ctrl-C."""
    from .live import LiveSource
    from .server import ViewServer

    server = ViewServer(LiveSource(Lab.attach(lab_name)), port)
    asyncio.run(server.serve(lambda url: say(f"view of lab {server.source.lab.name}: {url}  (Ctrl-C stops it)")))
