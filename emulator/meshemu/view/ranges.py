"""Receive and carrier-sense ranges of a node's radio, for the circles the
map draws around a selected node.

The distances come from the model itself (`meshemu-medium links`), never
from a second copy of the propagation formulas: a configuration with the
node's radio at the origin and probes along the x axis, first spaced
geometrically to bracket each threshold, then evenly inside the bracket.
Ranges are medians (no shadowing draw) and assume a receiver with the same
radio, as every node has in a lab without per-node radio overrides.
"""

from __future__ import annotations

import json
from typing import Any

from .. import medium

PROBES = 240
NEAREST_M = 0.5
FARTHEST_M = 200_000.0


def radio_ranges(lab_config: dict[str, Any]) -> list[dict[str, float | None]]:
    """Per node of the lab: {"rx_m", "cs_m", "rx_threshold_dbm"} (a range is
    None beyond FARTHEST_M or below NEAREST_M); nodes with the same radio
    share one computation."""
    known: dict[str, dict[str, float | None]] = {}
    ranges = []
    for node in lab_config["medium"]["nodes"]:
        key = json.dumps(node["radio"], sort_keys=True)
        if key not in known:
            known[key] = _ranges_of(lab_config["medium"], node["radio"], node["position"][2])
        ranges.append(known[key])
    return ranges


def _ranges_of(medium_config: dict[str, Any], radio: dict[str, Any], z: float) -> dict[str, float | None]:
    ratio = (FARTHEST_M / NEAREST_M) ** (1 / (PROBES - 1))
    coarse = [NEAREST_M * ratio ** i for i in range(PROBES)]
    result: dict[str, float | None] = {"rx_threshold_dbm": radio["rx_threshold_dbm"]}
    for key, flag in (("rx_m", "in_rx_range"), ("cs_m", "in_cs_range")):
        last = _last_in_range(medium_config, radio, z, coarse, flag)
        if last is None or last == len(coarse) - 1:
            result[key] = None
            continue
        low, high = coarse[last], coarse[last + 1]
        fine = [low + (high - low) * i / (PROBES - 1) for i in range(PROBES)]
        result[key] = fine[_last_in_range(medium_config, radio, z, fine, flag) or 0]
    return result


def _last_in_range(medium_config: dict[str, Any], radio: dict[str, Any], z: float, distances: list[float],
                   flag: str) -> int | None:
    """The index of the farthest probe the node at the origin reaches (the
    received power falls with distance in every propagation model)."""
    line = [0.0, *distances]  # node 0 at the origin, probe k is node k + 1
    nodes = [{"name": f"n{index}", "mac_address": _mac(index), "position": [x, 0.0, z], "promiscuous": False,
              "mobility": {"kind": "static"}, "radio": radio} for index, x in enumerate(line)]
    config = {"seed": medium_config["seed"], "mac": medium_config["mac"], "nodes": nodes, "links": []}
    reached = [link["b"] - 1 for link in medium.links(config)["links"] if link["a"] == 0 and link.get(flag)]
    return max(reached, default=None)


def _mac(index: int) -> str:
    return "02:00:" + ":".join(f"{byte:02x}" for byte in index.to_bytes(4, "big"))
