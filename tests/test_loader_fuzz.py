"""Property-based tests of the file loaders (hypothesis): random text and
bytes, and shipped files mutated in their structure and in their bytes, go
through what `meshemu validate` does (parse, schema, resolution with the
medium's placements, every scale planned). Each must load or be refused
with ConfigError, never another exception, within a time bound.

The default profile is derandomized (the same documents every run, so CI
cannot flake on a new draw); to search further:

    HYPOTHESIS_PROFILE=explore python -m pytest -q tests/test_loader_fuzz.py
"""

from __future__ import annotations

import copy
import os
import tempfile
import time
from io import StringIO
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from conftest import REPO
from meshemu.cli.files import validate_file
from meshemu.errors import ConfigError
from meshemu.ns2trace import parse_trace
from meshemu.schema import StrictModel
from meshemu.source import load_yaml, parse_yaml

# Far above what a document takes (most well under 0.1 s, a placement that
# searches its limit 2-3 s): only unbounded work would reach it.
BOUND_S = 20.0

settings.register_profile("ci", derandomize=True, deadline=None, database=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("explore", deadline=None, database=None, max_examples=1000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Small shipped files of every kind (the large studies take seconds to plan
# whole; their size is what limits.py bounds).
CORPUS_FILES = ["topologies/chain7.yaml", "topologies/grid5.yaml", "topologies/random50.yaml",
                "topologies/strip50.yaml", "experiments/demo.yaml", "experiments/re-tfrc/flows.yaml",
                "experiments/tcp-variants/route-repair.yaml", "experiments/validation/hidden-terminal.yaml",
                "experiments/validation/chain-sim.yaml"]


def _inlined(path: Path) -> Any:
    """A file's data with `topology: {file: ...}` replaced by that file's
    data, so the document stands alone in a temporary directory."""
    data = load_yaml(path).data
    topology = data.get("topology") if isinstance(data, dict) else None
    if isinstance(topology, dict) and set(topology) == {"file"}:
        data["topology"] = load_yaml(path.parent / topology["file"]).data
    return data


CORPUS = [_inlined(REPO / name) for name in CORPUS_FILES]
CORPUS_TEXTS = [(REPO / name).read_bytes() for name in CORPUS_FILES]
KEYS = sorted(StrictModel.known_keys() | {"kind", "file", "sweep", "scales", "traffic", "flows", "topology"})

# Values at the edges: units, limits, wrong types, NaN and infinities, names.
EDGE_TEXTS = ["0s", "-1s", "1e999s", "nan", ".5ms", "86401s", "200m", "-200m", "1e12m", "2Mbps", "1e30Gbps",
              "0B", "1GiB", "4097MiB", "-90dBm", "1e9W", "off", "on", "random", "first", "last", "farthest",
              "n0", "n999", "static", "aodv", "dsr", "fifo", "backpressure", "reno", "vegas", "two_ray_ground",
              "random_waypoint", "10.0.0.1", "10.0.0.0/31", "", "\u00e9", "x" * 300]
SCALARS = st.one_of(st.sampled_from(EDGE_TEXTS), st.integers(-2**70, 2**70), st.sampled_from([0, 1, 2, 3, 1000, 10**6]),
                    st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.none(),
                    st.text(max_size=12))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
                      max_leaves=12)


def _paths(data: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into the data (the root is the empty path)."""
    found = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            found += _paths(value, prefix + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _paths(value, prefix + (index,))
    return found


@st.composite
def mutated_documents(draw: st.DrawFn) -> str:
    """A shipped file whose data had values replaced, keys removed or added
    and list entries repeated, as YAML text."""
    data = copy.deepcopy(draw(st.sampled_from(CORPUS)))
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(_paths(data)))
        if not path:
            continue
        *parents, last = path
        parent = data
        for part in parents:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "remove", "add", "repeat"]))
        if action == "replace":
            parent[last] = draw(VALUES)
        elif action == "remove":
            del parent[last]
        elif action == "add" and isinstance(parent[last], dict):
            parent[last][draw(st.sampled_from(KEYS))] = draw(VALUES)
        elif action == "repeat" and isinstance(parent[last], list) and parent[last]:
            parent[last].extend(parent[last] * draw(st.integers(1, 3)))
    text = StringIO()
    YAML(typ="safe", pure=True).dump(data, text)
    return text.getvalue()


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    """A shipped file with bytes flipped, inserted, removed or repeated."""
    data = bytearray(draw(st.sampled_from(CORPUS_TEXTS)))
    for _ in range(draw(st.integers(1, 8))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["flip", "insert", "remove", "repeat"]))
        if action == "flip" and at < len(data):
            data[at] = draw(st.integers(0, 255))
        elif action == "insert":
            data[at:at] = draw(st.binary(max_size=8) | st.sampled_from([b": ", b"\n- ", b"&a ", b"*a", b"[", b"{",
                                                                      b"<<: ", b"\t", b"\x00", b"!!python/"]))
        elif action == "remove":
            del data[at:at + draw(st.integers(1, 40))]
        elif action == "repeat":
            data[at:at] = data[at:at + draw(st.integers(1, 200))] * draw(st.integers(1, 20))
    return bytes(data)


def validates_or_refuses(content: bytes | str) -> None:
    """`meshemu validate` on the content loads it or raises ConfigError, and
    comes back within the bound."""
    with tempfile.TemporaryDirectory() as directory:
        file = Path(directory) / "fuzz.yaml"
        file.write_bytes(content.encode() if isinstance(content, str) else content)
        started = time.perf_counter()
        try:
            validate_file(str(file))
        except ConfigError as exc:
            assert exc.problems and all(problem.file and problem.message for problem in exc.problems)
        assert time.perf_counter() - started < BOUND_S


@PROFILE
@given(st.text(max_size=400))
def test_random_text_parses_or_is_refused(text):
    try:
        parse_yaml(text, "fuzz.yaml")
    except ConfigError:
        pass


@PROFILE
@given(st.binary(max_size=400))
def test_random_bytes_validate_or_are_refused(content):
    validates_or_refuses(content)


@PROFILE
@given(mutated_documents())
def test_mutated_documents_validate_or_are_refused(text):
    validates_or_refuses(text)


@PROFILE
@given(mutated_bytes())
def test_mutated_files_validate_or_are_refused(content):
    validates_or_refuses(content)


TRACE_LINES = st.one_of(
    st.builds("$node_({}) set {}_ {}".format, st.integers(-1, 2**40), st.sampled_from("XYZW"),
              st.sampled_from(["1", "-1", "1e999", "1e12", ".5", "nan"])),
    st.builds('$ns_ at {} "$node_({}) setdest {} {} {}"'.format, st.sampled_from(["0", "-1", "1e999", "1e13", "5"]),
              st.integers(0, 5), st.sampled_from(["1", "1e12"]), st.sampled_from(["2", "-3"]),
              st.sampled_from(["0", "1", "1e6", "20"])),
    st.text(max_size=40))


@PROFILE
@given(st.lists(TRACE_LINES, max_size=20))
def test_ns2_traces_parse_or_are_refused(lines):
    try:
        parse_trace("\n".join(lines), "moves.ns2")
    except ConfigError:
        pass
