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
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import Composer, MaxDepthExceededError
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from . import limits
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

    def where_named(self, path: DataPath, error: ConfigError) -> ConfigError:
        """`error` of a file named at `path`: a refusal of the whole file
        (missing, a directory, too large) is put where the name is written;
        problems inside the file keep their own place."""
        return ConfigError([problem if problem.line else self.problem(path, f"{problem.file}: {problem.message}")
                            for problem in error.problems])

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


def read_user_file(path: str | Path, name: str, max_bytes: int) -> str:
    """The text of a user's file, refused with a reason (and the place, for
    bad bytes) when it is no regular file, larger than `max_bytes` or not
    UTF-8 text. Devices, FIFOs and sockets are never opened: opening some
    has effects (a watchdog starts, a tape rewinds), reading others never
    ends (/dev/zero)."""

    def refuse(message: str, line: int = 0, column: int = 0) -> ConfigError:
        return ConfigError([Problem(name, line, column, "", message)])

    try:
        kind = os.stat(path).st_mode
    except FileNotFoundError:
        raise refuse("no such file") from None
    except OSError as exc:
        raise refuse(f"cannot read: {exc.strerror}") from None
    if stat.S_ISDIR(kind):
        raise refuse("is a directory, not a file")
    if not stat.S_ISREG(kind):
        raise refuse("is not a regular file (a device, FIFO or socket): not read")
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise refuse(f"cannot read: {exc.strerror}") from None
    with open(descriptor, "rb") as file:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # swapped for something else since the check
            raise refuse("is not a regular file (a device, FIFO or socket): not read")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise refuse(f"larger than {max_bytes} bytes, the most meshemu reads from such a file "
                     "(meshemu/limits.py): not read")
    if b"\0" in data:
        raise refuse("a binary file, not text (a NUL byte)", *_line_column(data, data.index(b"\0")))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise refuse(f"not UTF-8 text (byte 0x{data[exc.start]:02x})", *_line_column(data, exc.start)) from None


def _line_column(data: bytes, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of a byte offset."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", errors="replace")) + 1
    return data.count(b"\n", 0, offset) + 1, column


def load_yaml(path: str | Path, shown_name: str | None = None) -> Document:
    """Read a YAML file into a located `Document`; syntax errors, duplicate
    keys, files beyond meshemu's limits and unreadable files become a
    `ConfigError` naming the place."""
    name = shown_name if shown_name is not None else str(path)
    return parse_yaml(read_user_file(path, name, limits.MAX_FILE_BYTES), name)


class _TooManyNodes(MarkedYAMLError):
    pass


class _CountingComposer(Composer):
    """ruamel's composer, stopping once the document holds more values,
    keys and aliases than meshemu reads: the parser's work grows with them
    (some 30 000 a second), whatever the file's size."""

    def __init__(self, loader: Any = None):
        super().__init__(loader)
        self.nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.nodes += 1
        if self.nodes > limits.MAX_YAML_NODES:
            raise _TooManyNodes(problem=f"more than {limits.MAX_YAML_NODES} values and keys, the most meshemu reads "
                                       "(meshemu/limits.py)", problem_mark=self.parser.peek_event().start_mark)
        return super().compose_node(parent, index)


def parse_yaml(text: str, name: str) -> Document:
    yaml = YAML(typ="safe", pure=True)
    yaml.max_depth = limits.MAX_DEPTH
    yaml.Composer = _CountingComposer
    try:
        root = yaml.compose(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        if isinstance(exc, MaxDepthExceededError):
            message = f"nested more than {limits.MAX_DEPTH} deep, the most meshemu reads (meshemu/limits.py)"
        elif isinstance(exc, _TooManyNodes):
            message = exc.problem
        else:
            message = "YAML syntax error: " + (" ".join(part for part in (exc.context, exc.problem) if part)
                                               or "invalid YAML")
        raise ConfigError([Problem(name, line, column, "", message)]) from None
    except ReaderError as exc:  # a character YAML does not allow (a control character)
        before = text[:exc.position]
        line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        raise ConfigError([Problem(name, line, column, "", f"YAML syntax error: character "
                                   f"U+{exc.character:04X} is not allowed ({exc.reason})")]) from None
    except YAMLError as exc:
        raise ConfigError([Problem(name, 0, 0, "", f"YAML syntax error: {exc}")]) from None
    document = Document(name, None)
    if root is None:
        return document
    problems: list[Problem] = []
    document.data = _Converter(document, yaml, problems).convert(root, ())
    if problems:
        raise ConfigError(problems)
    return document


def _mark_of(node: Node, name: str) -> Mark:
    return Mark(name, node.start_mark.line + 1, node.start_mark.column + 1)


class _Converter:
    """A composed YAML tree -> plain data, recording every position. Aliases
    are expanded here, so here the values are counted: a few lines of
    aliases can stand for billions of them."""

    def __init__(self, document: Document, yaml: YAML, problems: list[Problem]):
        self.doc = document
        self.constructor = yaml.constructor
        self.problems = problems
        self.values = 0
        self.marks: dict[int, Mark] = {}  # by node: an alias's values share the marks of what it names

    def mark(self, node: Node) -> Mark:
        mark = self.marks.get(id(node))
        if mark is None:
            mark = self.marks[id(node)] = _mark_of(node, self.doc.file)
        return mark

    def convert(self, node: Node, path: DataPath, depth: int = 0, doc: Document | None = None) -> Any:
        doc = doc or self.doc
        doc.values[path] = self.mark(node)
        self.values += 1
        if self.values > limits.MAX_VALUES:
            raise ConfigError([doc.problem(path, f"more than {limits.MAX_VALUES} values once aliases are expanded, "
                                                 "the most meshemu reads (meshemu/limits.py)")])
        if depth > limits.MAX_DEPTH:
            raise ConfigError([doc.problem(path, f"nested more than {limits.MAX_DEPTH} deep once aliases are "
                                                 "expanded (a recursive alias?)")])
        if isinstance(node, ScalarNode):
            try:
                return self.constructor.construct_object(node, deep=True)
            except YAMLError as exc:
                self.problems.append(doc.problem(path, f"bad value: {getattr(exc, 'problem', exc)}"))
                return None
        if isinstance(node, SequenceNode):
            return [self.convert(item, path + (index,), depth + 1, doc) for index, item in enumerate(node.value)]
        if isinstance(node, MappingNode):
            return self._mapping(node, path, depth, doc)
        self.problems.append(doc.problem(path, "unsupported YAML node"))
        return None

    def _mapping(self, node: MappingNode, path: DataPath, depth: int, doc: Document) -> dict[Any, Any]:
        result: dict[Any, Any] = {}
        first_seen: dict[Any, Mark] = {}
        merged: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                merged.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode):
                self.problems.append(Problem(doc.file, *_line_col(key_node), format_path(path),
                                             "a key must be a plain value"))
                continue
            key = self.constructor.construct_object(key_node, deep=True)
            key_mark = self.mark(key_node)
            if key in first_seen:
                self.problems.append(
                    Problem(doc.file, key_mark.line, key_mark.column, format_path(path + (key,)),
                            f"{_duplicate_what(path)} {key!r} (first defined at line {first_seen[key].line})")
                )
                continue
            first_seen[key] = key_mark
            doc.keys[path + (key,)] = key_mark
            result[key] = self.convert(value_node, path + (key,), depth + 1, doc)
        for merge_node in merged:  # YAML merge keys ("<<: *defaults"): explicit keys win
            sources = merge_node.value if isinstance(merge_node, SequenceNode) else [merge_node]
            for source in sources:
                if not isinstance(source, MappingNode):
                    self.problems.append(Problem(doc.file, *_line_col(source), format_path(path),
                                                 "'<<' must merge a mapping"))
                    continue
                extra = self.convert(source, path, depth + 1, Document(doc.file, None))
                for key, value in extra.items():
                    if key not in result:
                        result[key] = value
                        _locate_merged(value, path + (key,), doc, self.mark(source))
        doc.values[path] = self.mark(node)
        return result


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
        path = _data_path(doc.get(prefix), loc, error["type"] == "missing")
        message = _message(error, path, known_keys)
        problems.append(doc.problem(prefix + path, message, at_key=at_key or error["type"] == "extra_forbidden"))
    return problems


def _data_path(data: Any, loc: tuple[Any, ...], missing: bool) -> DataPath:
    path: list[str | int] = []
    node = data
    for index, part in enumerate(loc):
        if isinstance(node, dict) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif missing and index == len(loc) - 1 and isinstance(node, dict) and isinstance(part, str):
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
