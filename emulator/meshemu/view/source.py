"""What the server serves, whatever its origin (live.py: a lab that is up;
replay.py: a recorded run): the view's `meta`, the newest frame, and the
frames to come for every page."""

from __future__ import annotations

import asyncio
from typing import Any


class FrameSource:
    """Subclasses make frames and `publish` them; `run` is their loop (the
    server runs it until it stops)."""

    def __init__(self, meta: dict[str, Any]):
        self.meta = meta
        self.latest: dict[str, Any] | None = None
        self._listeners: set[asyncio.Queue[dict[str, Any]]] = set()

    def listen(self) -> asyncio.Queue[dict[str, Any]]:
        """A queue of the frames to come (the newest replaces one not yet
        taken: a slow page skips frames, it never falls behind)."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=1)
        self._listeners.add(queue)
        return queue

    def forget(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        self._listeners.discard(queue)

    def publish(self, frame: dict[str, Any]) -> None:
        self.latest = frame
        for queue in self._listeners:
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(frame)

    async def run(self) -> None:
        raise NotImplementedError
