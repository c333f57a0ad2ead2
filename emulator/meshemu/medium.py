"""Talking to `meshemu-medium`: the `links`, `connected`, `mobility` and `sim` subcommands
and the control socket of a running lab (emulator/README.md sections 2, 3
and 6)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from .errors import MediumError

MEDIUM_PROGRAM = "meshemu-medium"
# `links` or a stand-in (tests): a medium configuration -> who hears whom.
LinksFunction = Callable[[dict[str, Any]], dict[str, Any]]


def find_program(name: str = MEDIUM_PROGRAM) -> Path:
    """A Rust program of the project: next to the venv's python, then on PATH."""
    beside_python = Path(sys.executable).parent / name
    if beside_python.is_file() and os.access(beside_python, os.X_OK):
        return beside_python
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    raise MediumError(f"{name} not found (looked in {beside_python.parent} and on PATH): run ./setup.sh to build "
                      "and install it")


class ConfigRejected(MediumError):
    """The medium refused a value of the configuration it was given: `path`
    names the field as section 1 does (`nodes[3].radio.cw_min`)."""

    def __init__(self, what: str, path: str, reason: str):
        super().__init__(f"{what}: {path}: {reason}")
        self.path = path
        self.reason = reason


# How meshemu-medium reports a configuration read from stdin that the model
# refuses (its ConfigError, `PATH: MESSAGE`, after the input's name).
_REJECTED = re.compile(r"\Ameshemu-medium: stdin: (?P<path>[a-z_][a-z0-9_.\[\]]*): (?P<reason>.+)\Z")


def _failure(what: str, result: subprocess.CompletedProcess[str], config_at: str | None = None) -> MediumError:
    """The error of a failed subcommand; ConfigRejected if its input holds a
    medium configuration (under the path prefix `config_at`) that the model
    refused."""
    detail = result.stderr.strip() or result.stdout.strip() or "no output"
    rejected = _REJECTED.match(detail)
    if config_at is not None and rejected is not None and rejected["path"].startswith(config_at):
        return ConfigRejected(what, rejected["path"].removeprefix(config_at), rejected["reason"])
    return MediumError(f"{what} failed (exit {result.returncode}): {detail}")


def _decode(what: str, text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MediumError(f"{what} printed something that is not JSON ({exc}): {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise MediumError(f"{what} printed JSON that is not an object: {text[:200]!r}")
    return value


def links(config: dict[str, Any]) -> dict[str, Any]:
    """`meshemu-medium links`: every audible ordered pair at time 0. The
    report is shared by every caller asking about the same configuration
    (a sweep plans many runs on one topology): read it, do not change it."""
    return _links_of(json.dumps(config, sort_keys=True))


@functools.lru_cache(maxsize=16)
def _links_of(config_json: str) -> dict[str, Any]:
    result = subprocess.run([str(find_program()), "links", "-"], input=config_json, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise _failure(f"{MEDIUM_PROGRAM} links", result, config_at="")
    return _decode(f"{MEDIUM_PROGRAM} links", result.stdout)


def sim(scenario: dict[str, Any]) -> dict[str, Any]:
    """`meshemu-medium sim -`: one virtual-time run; the scenario on stdin."""
    program = find_program()
    result = subprocess.run([str(program), "sim", "-"], input=json.dumps(scenario), capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise _failure(f"{MEDIUM_PROGRAM} sim", result)
    return _decode(f"{MEDIUM_PROGRAM} sim", result.stdout)


def trajectories(config: dict[str, Any], until_ns: int) -> list[list[dict[str, Any]]]:
    """`meshemu-medium mobility -`: every node's path from time 0 until at
    least `until_ns`, as the model moves it: [{"t_ns", "position"}, ...] per
    node, straight lines between the points."""
    program = find_program()
    result = subprocess.run([str(program), "mobility", "-", "--until-ns", str(until_ns)], input=json.dumps(config),
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise _failure(f"{MEDIUM_PROGRAM} mobility", result)
    return [node["trajectory"] for node in _decode(f"{MEDIUM_PROGRAM} mobility", result.stdout)["nodes"]]


def rx_neighbours(link_report: dict[str, Any], count: int) -> list[set[int]]:
    """For each node, the nodes that receive its frames (in receive range)."""
    neighbours: list[set[int]] = [set() for _ in range(count)]
    for link in link_report.get("links", []):
        if link.get("in_rx_range"):
            neighbours[link["a"]].add(link["b"])
    return neighbours


def validate(config: dict[str, Any]) -> None:
    """The model's own validation of a configuration (`connected` with no
    candidate: the medium is built, nothing is judged or printed but the
    empty answer); raises ConfigRejected naming what it refuses."""
    first_connected(json.dumps(config), [])


def first_connected(config_json: str, candidates: list[list[list[float]]]) -> tuple[int | None, list[int]]:
    """`meshemu-medium connected`: the index of the first candidate placement
    (a position per node of the configuration, given as its JSON text) in
    which every node reaches every other at time 0 over links that work both
    ways, or None; and the largest group of nodes that reach each other in
    each candidate examined (up to that first one). The model validates the
    configuration first (ConfigRejected)."""
    program = find_program()
    request = '{"medium": ' + config_json + ', "candidates": ' + json.dumps(candidates) + "}"
    result = subprocess.run([str(program), "connected", "-"], input=request, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise _failure(f"{MEDIUM_PROGRAM} connected", result, config_at="medium.")
    answer = _decode(f"{MEDIUM_PROGRAM} connected", result.stdout)
    return answer["first_connected"], answer["largest_components"]


class ControlClient:
    """One request per connection to a lab's control socket (section 6)."""

    def __init__(self, socket_path: Path, timeout: float = 10.0):
        self.socket_path = socket_path
        self.timeout = timeout

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        message = json.dumps({"op": op, **fields}) + "\n"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
                connection.settimeout(self.timeout)
                connection.connect(str(self.socket_path))
                connection.sendall(message.encode())
                reply = _read_line(connection)
        except FileNotFoundError:
            raise MediumError(f"no control socket at {self.socket_path}: is the lab's medium running?") from None
        except OSError as exc:
            raise MediumError(f"control socket {self.socket_path}: {exc}") from None
        answer = _decode(f"the medium's reply to {op!r}", reply)
        if answer.get("ok") is not True:
            raise MediumError(f"the medium refused {op!r}: {answer.get('error', 'no reason given')}")
        return answer


def _read_line(connection: socket.socket) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
    if not data:
        raise OSError("the medium closed the connection without answering")
    return data.decode()
