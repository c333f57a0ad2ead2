"""What sim files and experiment files share: a topology named by file or
written inline, seeds, and a sweep — dotted paths into the file, each with a
list of values, expanded into the cartesian product. An entry may name
several paths separated by commas (`traffic.0.dst,traffic.1.dst`): each gets
the same value. An entry may also be a set of named cases, each setting
several paths at once (`variant: {reno-nosack: {traffic.0.cc: reno,
traffic.0.sack: false}, cubic: {traffic.0.cc: cubic}}`): the parameter is the
entry's name, its values the case names. Every swept value keeps its place in
the file, so a bad value is reported at its sweep entry
(`sweep.topology.radio.rts_threshold[1]`, `sweep.variant.cubic.traffic.0.cc`)."""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from . import limits
from .errors import ConfigError, Problem
from .source import DataPath, Document, Mark, format_path, load_yaml

# The name of an entry of named cases (a parameter name, not a path).
CASES_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")


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
    try:
        topology_document = load_yaml(path)
    except ConfigError as exc:
        raise document.where_named(("topology", "file"), exc) from None
    document.replace(("topology",), topology_document.data, topology_document)


def sweep_paths(document: Document) -> list[str]:
    """The sweep entries as written (the names of the swept parameters)."""
    return [entry.text for entry in _sweep_entries(document)]


def expand(document: Document) -> Iterator[SweepPoint | list[Problem]]:
    """Every point of the sweep, in order (the last entry varies fastest); a
    point whose paths cannot be set yields its problems instead."""
    sweep = _sweep_entries(document)
    _check_size(document, sweep)
    for point in itertools.product(*[range(len(entry.values)) for entry in sweep]):
        variant = document.copy()
        params: dict[str, Any] = {}
        choices: dict[str, int] = {}
        unreachable = []
        for entry, choice in zip(sweep, point):
            settings = entry.settings(choice)
            reasons = [reason for reason in (_unreachable(variant.data, path) for path, _, _ in settings) if reason]
            if reasons:
                unreachable += [document.problem(("sweep", entry.text), reason, at_key=True) for reason in reasons]
                continue
            for path, value, where in settings:
                mark, _ = document.mark(where)
                variant.replace(path, value, Mark(mark.file, mark.line, mark.column, format_path(where)))
            params[entry.text] = entry.values[choice]
            choices[entry.text] = choice
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


def _check_size(document: Document, sweep: list[_Entry]) -> None:
    """Refuse a plan of more runs than meshemu plans, before expanding it:
    sweep points times seeds (the most seeds any point may have; more than
    a point may have at all is the schema's to report, where it is written)."""
    points = math.prod(len(entry.values) for entry in sweep)
    settings = [(key, document.data.get(key)) for key in ("seeds", "repetitions")]
    settings += [(path[0], value) for entry in sweep for assignment in entry.assignments
                 for path, value, _ in assignment if path in (("seeds",), ("repetitions",))]
    seeds = min(max(_seed_count(key, value) for key, value in settings), limits.MAX_SEEDS)
    if points * seeds > limits.MAX_RUNS:
        raise document.error(("sweep",), f"{points} sweep points x {seeds} seeds are {points * seeds} runs, more than "
                                         f"the {limits.MAX_RUNS} meshemu plans from one file (meshemu/limits.py): "
                                         "split the study into files or sweep fewer values")


def _seed_count(key: str, value: Any) -> int:
    """How many seeds `seeds` or `repetitions` set to `value` gives (1 for
    anything else: validation reports it)."""
    if key == "seeds" and isinstance(value, list):
        return len(value)
    if key == "repetitions" and isinstance(value, int) and not isinstance(value, bool):
        return value
    return 1


@dataclass(frozen=True)
class _Entry:
    """One sweep entry: its name, its values (case names for named cases)
    and, per value, the (path, value) pairs it sets."""

    text: str
    values: list[Any]
    assignments: list[list[tuple[DataPath, Any, DataPath]]]  # per value: (path, value, where it is written)

    def settings(self, choice: int) -> list[tuple[DataPath, Any, DataPath]]:
        return self.assignments[choice]


def _sweep_entries(document: Document) -> list[_Entry]:
    sweep = document.data.get("sweep")
    if sweep is None:
        return []
    if not isinstance(sweep, dict):
        raise document.error(("sweep",), "expected a mapping: dotted path -> list of values")
    entries = []
    problems = []
    for text, values in sweep.items():
        if isinstance(values, dict):
            entry = _cases_entry(document, text, values, problems)
            if entry is not None:
                entries.append(entry)
            continue
        if not isinstance(values, list) or not values:
            problems.append(document.problem(("sweep", text), "expected a non-empty list of values, or named "
                                                              "cases ({NAME: {PATH: VALUE, ...}, ...})"))
            continue
        paths = [_parse_sweep_path(part) for part in text.split(",")] if isinstance(text, str) else [None]
        if any(path is None or path[0] == "sweep" for path in paths):
            problems.append(document.problem(("sweep", text), f"bad sweep path {text!r}: expected a dotted path "
                                                              "into this file, such as topology.generate.n",
                                             at_key=True))
            continue
        assignments = [[(path, value, ("sweep", text, choice)) for path in paths]
                       for choice, value in enumerate(values)]
        entries.append(_Entry(text, values, assignments))
    if problems:
        raise ConfigError(problems)
    return entries


def _cases_entry(document: Document, text: Any, cases: dict[Any, Any], problems: list[Problem]) -> _Entry | None:
    """`NAME: {CASE: {PATH: VALUE, ...}, ...}`: the parameter NAME takes the
    case names as values; each case sets its paths."""
    if not isinstance(text, str) or not CASES_NAME.match(text):
        problems.append(document.problem(("sweep", text), f"bad name of named cases {text!r}: a letter, then "
                                                          "letters, digits, _ or - (a parameter name, not a path)",
                                         at_key=True))
        return None
    if not cases:
        problems.append(document.problem(("sweep", text), "expected at least one case"))
        return None
    values, assignments = [], []
    for case, settings in cases.items():
        if isinstance(case, bool) or not isinstance(case, (str, int, float)):
            problems.append(document.problem(("sweep", text, case), f"bad case name {case!r}: a word or a number",
                                             at_key=True))
            continue
        if not isinstance(settings, dict):
            problems.append(document.problem(("sweep", text, case), "expected a mapping of dotted paths to values "
                                                                    "(or {} for the file as written)"))
            continue
        assignment = []
        for path_text, value in settings.items():
            path = _parse_sweep_path(path_text)
            if path is None or path[0] in ("sweep", "scales"):
                problems.append(document.problem(("sweep", text, case, path_text),
                                                 f"bad path {path_text!r}: expected a dotted path into this file, "
                                                 "such as traffic.0.cc", at_key=True))
                continue
            assignment.append((path, value, ("sweep", text, case, path_text)))
        values.append(case)
        assignments.append(assignment)
    return _Entry(text, values, assignments)


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
