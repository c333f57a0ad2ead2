"""User files as located data: every value remembers its file, line and column.

A YAML file is composed (not constructed) with ruamel.yaml so that every key
and value keeps its position; the result is plain Python data (dict, list,
str, int, float, bool, None) plus two tables from a *data path* (a tuple of
keys and list indexes) to the `Mark` of the value and of its key. Errors
found later — by pydantic or by the resolution code — name a data path and
are turned into `FILE:LINE:COL: path: problem` through these tables.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .errors import ConfigError, Problem

DataPath = tuple[str | int, ...]

MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Mark:
    """Where a value came from. `label` replaces the field path in messages
    (a swept value is reported under its sweep entry, not the field it sets)."""

    file: str
    line: int
    column: int
    label: str | None = None


def format_path(path: DataPath) -> str:
    """("nodes", "n3", "position") -> "nodes.n3.position"; indexes as [i]."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


@dataclass
class Document:
    """Plain data of a user file with the position of every key and value."""

    file: str
    data: Any
    values: dict[DataPath, Mark] = field(default_factory=dict)
    keys: dict[DataPath, Mark] = field(default_factory=dict)

    def mark(self, path: DataPath, at_key: bool = False) -> tuple[Mark, DataPath]:
        """The mark of `path` (or of its nearest located ancestor) and the
        path that mark belongs to."""
        table = self.keys if at_key else self.values
        if path in table:
            return table[path], path
        for end in range(len(path) - 1, -1, -1):
            prefix = path[:end]
            if prefix in self.values:
                return self.values[prefix], prefix
        return Mark(self.file, 0, 0), ()

    def problem(self, path: DataPath, message: str, at_key: bool = False) -> Problem:
        mark, marked_path = self.mark(path, at_key)
        if mark.label is None:
            shown = format_path(path)
        else:  # a swept value: name the sweep entry, then what is inside it
            rest = path[len(marked_path):]
            shown = mark.label + ("." if rest and isinstance(rest[0], str) else "") + format_path(rest)
        return Problem(mark.file, mark.line, mark.column, shown, message)

    def error(self, path: DataPath, message: str, at_key: bool = False) -> ConfigError:
        return ConfigError([self.problem(path, message, at_key)])

    def get(self, path: DataPath, default: Any = None) -> Any:
        node = self.data
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
                node = node[part]
            else:
                return default
        return node

    def copy(self) -> "Document":
        return Document(self.file, copy.deepcopy(self.data), dict(self.values), dict(self.keys))

    def replace(self, path: DataPath, value: Any, marks: "Document | Mark") -> None:
        """Put `value` at `path` (creating missing mappings on the way).
        `marks` locates the new value: another document (grafted whole, its
        marks moved under `path`) or one mark for everything under `path`."""
        if not path:
            raise ValueError("cannot replace the document root")
        parent = self.data
        for depth, part in enumerate(path[:-1]):
            child = parent[part] if _has(parent, part) else None
            if not isinstance(child, (dict, list)):
                child = {}
                parent[part] = child
                if isinstance(marks, Mark):
                    self.values[path[: depth + 1]] = marks
                    self.keys[path[: depth + 1]] = marks
            parent = child
        parent[path[-1]] = value
        for table in (self.values, self.keys):
            for old in [p for p in table if p[: len(path)] == path]:
                del table[old]
        if isinstance(marks, Mark):
            self.values[path] = marks
            self.keys[path] = marks
        else:
            for sub, mark in marks.values.items():
                self.values[path + sub] = mark
            for sub, mark in marks.keys.items():
                self.keys[path + sub] = mark


def _has(container: Any, part: str | int) -> bool:
    if isinstance(container, dict):
        return part in container
    return isinstance(part, int) and 0 <= part < len(container)


def load_yaml(path: str | Path, shown_name: str | None = None) -> Document:
    """Read a YAML file into a located `Document`; syntax errors, duplicate
    keys and unreadable files become a `ConfigError` naming the place."""
    name = shown_name if shown_name is not None else str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem(name, 0, 0, "", "no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([Problem(name, 0, 0, "", f"cannot read: {exc}")]) from None
    return parse_yaml(text, name)


def parse_yaml(text: str, name: str) -> Document:
    yaml = YAML(typ="safe", pure=True)
    try:
        root = yaml.compose(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(part for part in (exc.context, exc.problem) if part) or "invalid YAML"
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise ConfigError([Problem(name, line, column, "", f"YAML syntax error: {message}")]) from None
    except YAMLError as exc:
        raise ConfigError([Problem(name, 0, 0, "", f"YAML syntax error: {exc}")]) from None
    document = Document(name, None)
    if root is None:
        return document
    problems: list[Problem] = []
    document.data = _convert(root, (), document, yaml, problems, depth=0)
    if problems:
        raise ConfigError(problems)
    return document


def _mark_of(node: Node, name: str) -> Mark:
    return Mark(name, node.start_mark.line + 1, node.start_mark.column + 1)


def _convert(node: Node, path: DataPath, doc: Document, yaml: YAML, problems: list[Problem], depth: int) -> Any:
    doc.values[path] = _mark_of(node, doc.file)
    if depth > 100:
        problems.append(doc.problem(path, "nesting too deep (recursive alias?)"))
        return None
    if isinstance(node, ScalarNode):
        try:
            return yaml.constructor.construct_object(node, deep=True)
        except YAMLError as exc:
            problems.append(doc.problem(path, f"bad value: {getattr(exc, 'problem', exc)}"))
            return None
    if isinstance(node, SequenceNode):
        return [_convert(item, path + (index,), doc, yaml, problems, depth + 1) for index, item in enumerate(node.value)]
    if isinstance(node, MappingNode):
        result: dict[Any, Any] = {}
        first_seen: dict[Any, Mark] = {}
        merged: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                merged.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode):
                problems.append(Problem(doc.file, *_line_col(key_node), format_path(path), "a key must be a plain value"))
                continue
            key = yaml.constructor.construct_object(key_node, deep=True)
            key_mark = _mark_of(key_node, doc.file)
            if key in first_seen:
                problems.append(
                    Problem(doc.file, key_mark.line, key_mark.column, format_path(path + (key,)),
                            f"{_duplicate_what(path)} {key!r} (first defined at line {first_seen[key].line})")
                )
                continue
            first_seen[key] = key_mark
            doc.keys[path + (key,)] = key_mark
            result[key] = _convert(value_node, path + (key,), doc, yaml, problems, depth + 1)
        for merge_node in merged:  # YAML merge keys ("<<: *defaults"): explicit keys win
            sources = merge_node.value if isinstance(merge_node, SequenceNode) else [merge_node]
            for source in sources:
                if not isinstance(source, MappingNode):
                    problems.append(Problem(doc.file, *_line_col(source), format_path(path), "'<<' must merge a mapping"))
                    continue
                extra = _convert(source, path, Document(doc.file, None), yaml, problems, depth + 1)
                for key, value in extra.items():
                    if key not in result:
                        result[key] = value
                        _locate_merged(value, path + (key,), doc, _mark_of(source, doc.file))
        doc.values[path] = _mark_of(node, doc.file)
        return result
    problems.append(doc.problem(path, "unsupported YAML node"))
    return None


def _locate_merged(value: Any, path: DataPath, doc: Document, mark: Mark) -> None:
    doc.values[path] = mark
    doc.keys[path] = mark
    if isinstance(value, dict):
        for key, item in value.items():
            _locate_merged(item, path + (key,), doc, mark)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _locate_merged(item, path + (index,), doc, mark)


def _line_col(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _duplicate_what(path: DataPath) -> str:
    return "duplicate node name" if path == ("nodes",) else "duplicate key"


# --- pydantic errors -> problems -------------------------------------------

def pydantic_problems(doc: Document, errors: list[dict[str, Any]], prefix: DataPath = (), known_keys: frozenset[str] = frozenset()) -> list[Problem]:
    """Turn pydantic's `ValidationError.errors()` into located problems.

    pydantic's `loc` mixes data keys with union tags; the data path is the
    part of it that walks the data, so tags are skipped."""
    problems = []
    for error in errors:
        loc = tuple(error["loc"])
        at_key = bool(loc) and loc[-1] == "[key]"
        path = _data_path(doc.get(prefix), loc)
        message = _message(error, path, known_keys)
        problems.append(doc.problem(prefix + path, message, at_key=at_key or error["type"] == "extra_forbidden"))
    return problems


def _data_path(data: Any, loc: tuple[Any, ...]) -> DataPath:
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif index == len(loc) - 1 and isinstance(node, dict) and isinstance(part, str) and part != "[key]":
            path.append(part)  # a missing field: name it although the data has no such key
        # anything else is a union tag pydantic adds to loc: not part of the data
    return tuple(path)


def _message(error: dict[str, Any], path: DataPath, known_keys: frozenset[str]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        key = path[-1] if path else "?"
        close = difflib.get_close_matches(str(key), sorted(known_keys - {str(key)}), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown key {key!r}{hint}"
    if kind == "missing":
        key = error["loc"][-1] if error["loc"] else "?"
        return f"required key {key!r} is missing"
    message = error["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if message.startswith(prefix):
            message = message[len(prefix):]
    if kind in {"float_type", "int_type", "bool_type", "string_type", "list_type", "dict_type", "model_type"}:
        message += f", got {_describe(error.get('input'))}"
    return message[:1].lower() + message[1:]


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "nothing"
    if isinstance(value, str):
        return f"the text {value!r}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
