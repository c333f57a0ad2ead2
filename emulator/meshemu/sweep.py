"""What sim files and experiment files share: a topology named by file or
written inline, seeds, and a sweep — dotted paths into the file, each with a
list of values, expanded into the cartesian product. An entry may name
several paths separated by commas (`traffic.0.dst,traffic.1.dst`): each gets
the same value. Every swept value keeps its place in the file, so a bad value
is reported at its sweep entry (`sweep.topology.radio.rts_threshold[1]`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .errors import ConfigError, Problem
from .source import DataPath, Document, Mark, format_path, load_yaml


@dataclass(frozen=True)
class SweepPoint:
    """One point of the sweep: the file with the swept values put in."""

    document: Document
    params: dict[str, Any]  # sweep path -> the value as written
    choices: dict[str, int]  # sweep path -> index of that value in the sweep list


def inline_topology_file(document: Document) -> None:
    """`topology: {file: PATH}` -> that file's content, located in its own file."""
    topology = document.data.get("topology")
    if not (isinstance(topology, dict) and "file" in topology):
        return
    if set(topology) != {"file"}:
        raise document.error(("topology",), "give either file: or an inline topology, not both")
    name = topology["file"]
    if not isinstance(name, str):
        raise document.error(("topology", "file"), "expected a path to a topology file")
    mark, _ = document.mark(("topology", "file"))
    path = Path(mark.file).parent / name
    if not path.is_file():
        raise document.error(("topology", "file"), f"no such file: {path}")
    topology_document = load_yaml(path)
    document.replace(("topology",), topology_document.data, topology_document)


def sweep_paths(document: Document) -> list[str]:
    """The sweep entries as written (the names of the swept parameters)."""
    return [text for text, _, _ in _sweep_entries(document)]


def expand(document: Document) -> Iterator[SweepPoint | list[Problem]]:
    """Every point of the sweep, in order (the last entry varies fastest); a
    point whose paths cannot be set yields its problems instead."""
    sweep = _sweep_entries(document)
    for point in itertools.product(*[range(len(values)) for _, _, values in sweep]):
        variant = document.copy()
        params: dict[str, Any] = {}
        choices: dict[str, int] = {}
        unreachable = []
        for (text, paths, values), choice in zip(sweep, point):
            reasons = [reason for reason in (_unreachable(variant.data, path) for path in paths) if reason]
            if reasons:
                unreachable += [document.problem(("sweep", text), reason, at_key=True) for reason in reasons]
                continue
            mark, _ = document.mark(("sweep", text, choice))
            for path in paths:
                variant.replace(path, values[choice],
                                Mark(mark.file, mark.line, mark.column, f"sweep.{text}[{choice}]"))
            params[text] = values[choice]
            choices[text] = choice
        yield unreachable if unreachable else SweepPoint(variant, params, choices)


def seeds_of(seeds: list[int] | None, seed: int | None, document: Document, repetitions: int | None = None) -> list[int]:
    """The seeds of a file: `seeds`, `seed`, `repetitions: N` (seeds 1..N),
    else the topology's seed (default 1)."""
    if seeds:
        return list(seeds)
    if seed is not None:
        return [seed]
    if repetitions is not None:
        return list(range(1, repetitions + 1))
    return [document.get(("topology", "seed"), 1)]


def _sweep_entries(document: Document) -> list[tuple[str, list[DataPath], list[Any]]]:
    sweep = document.data.get("sweep")
    if sweep is None:
        return []
    if not isinstance(sweep, dict):
        raise document.error(("sweep",), "expected a mapping: dotted path -> list of values")
    entries = []
    problems = []
    for text, values in sweep.items():
        if not isinstance(values, list) or not values:
            problems.append(document.problem(("sweep", text), "expected a non-empty list of values"))
            continue
        paths = [_parse_sweep_path(part) for part in text.split(",")] if isinstance(text, str) else [None]
        if any(path is None or path[0] == "sweep" for path in paths):
            problems.append(document.problem(("sweep", text), f"bad sweep path {text!r}: expected a dotted path "
                                                              "into this file, such as topology.generate.n",
                                             at_key=True))
            continue
        entries.append((text, paths, values))
    if problems:
        raise ConfigError(problems)
    return entries


def _unreachable(data: Any, path: DataPath) -> str | None:
    """Why a sweep cannot set `path` (a missing mapping is fine: it is made)."""
    node = data
    for depth, part in enumerate(path[:-1] if len(path) > 1 else ()):
        if isinstance(part, int):
            if not isinstance(node, list) or part >= len(node):
                return f"{format_path(path[:depth + 1])} is not an element of a list in this file"
            node = node[part]
        elif isinstance(node, dict):
            node = node.get(part, {})
        else:
            return f"{format_path(path[:depth])} is not a mapping"
    last = path[-1]
    if isinstance(last, int) and not (isinstance(node, list) and last < len(node)):
        return f"{format_path(path)} is not an element of a list in this file"
    if isinstance(last, str) and not isinstance(node, dict):
        return f"{format_path(path[:-1])} is not a mapping"
    return None


def _parse_sweep_path(text: Any) -> DataPath | None:
    if not isinstance(text, str) or not text:
        return None
    path: list[str | int] = []
    for part in text.split("."):
        if not part:
            return None
        path.append(int(part) if part.isdigit() else part)
    return tuple(path) if isinstance(path[0], str) else None
