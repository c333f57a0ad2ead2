"""What a lab offers the backends and plug-ins that run in it (hwsim.py,
routing.py, queueing.py): `Lab` (lab.py) passes itself as a `PluginLab`, so
they use a lab without importing lab.py, which imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any, Iterator, Protocol, Sequence

from .choices import QueueingChoice, RoutingChoice


class CommandOutput(Protocol):
    returncode: int
    stdout: str
    stderr: str


class PluginProcess(Protocol):
    """A program a plug-in started in a node (lab.Process)."""

    node: str
    argv: list[str]

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def terminate(self) -> None: ...


class PluginNode(Protocol):
    """A node of the lab (lab.Node)."""

    index: int
    name: str
    netns: str

    def run(self, argv: Sequence[str], timeout: float | None = None, check: bool = False,
            input: str | None = None) -> CommandOutput: ...

    def spawn(self, argv: Sequence[str], stdout: int | IO[Any] | None = ...,
              stderr: int | IO[Any] | None = ...) -> PluginProcess: ...


class PluginLab(Protocol):
    """A lab being brought up or up (lab.Lab)."""

    run_dir: Path
    config: dict[str, Any]  # LAB.json
    ready: dict[str, Any] | None  # the medium's ready line
    routing: RoutingChoice
    queueing: QueueingChoice

    def __getitem__(self, name: str) -> PluginNode: ...

    def __iter__(self) -> Iterator[PluginNode]: ...

    def processes(self, program: str) -> list[PluginProcess]: ...
