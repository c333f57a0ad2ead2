"""Quantities with explicit units, as users write them: `200m`, `2Mbps`, `20us`.

Each quantity converts to the unit of the resolved configuration (metres,
nanoseconds, bit/s, bytes, dBm, dB, Hz, m/s), whose key names that unit:
`data_rate: 2Mbps` resolves to `data_rate_bps: 2000000` (`Quantity.suffix`).
Parsers raise `ValueError` with a message meant for the user; the schema
turns it into a located problem.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

from . import limits

_NUMBER_AND_UNIT = re.compile(
    r"^\s*(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>[A-Za-zµ/]*)\s*$"
)


def _milliwatts_to_dbm(value: float) -> float:
    if value <= 0:
        raise ValueError("a power in mW or W must be positive (use dBm for zero or negative levels)")
    return 10.0 * math.log10(value)


@dataclass(frozen=True, eq=False)  # equal only to itself: hashable, to ride in Annotated metadata
class Quantity:
    """A kind of value and its units: unit name -> converter to the base unit."""

    name: str  # "length", "time", ...
    suffix: str  # the base unit in resolved keys: "m", "ns", "bps", ...
    example: str  # shown in messages
    units: dict[str, Callable[[float], float]]
    maximum: float  # the largest magnitude meshemu takes, in the base unit (meshemu/limits.py)
    shown_in: str  # the unit the maximum is shown in

    def parse(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ValueError(f"expected a {self.name} such as {self.example}")
        if not isinstance(value, str):
            raise ValueError(f"missing unit: write the {self.name} with its unit, such as {self.example} "
                             f"(units: {self.unit_list()})")
        match = _NUMBER_AND_UNIT.match(value)
        if match is None:
            raise ValueError(f"bad {self.name} {value!r}: expected a number and a unit, such as {self.example}")
        unit = match["unit"]
        if not unit:
            raise ValueError(f"missing unit in {value!r}: write it such as {self.example} (units: {self.unit_list()})")
        convert = self.units.get(unit)
        if convert is None:
            raise ValueError(f"unknown unit {unit!r} for a {self.name}; use one of: {self.unit_list()}")
        number = float(match["number"])
        if not math.isfinite(number):
            raise ValueError(f"bad {self.name} {value!r}: not a finite number")
        return self.within_limit(convert(number), value)

    def within_limit(self, number: float, written: Any) -> float:
        """`number` (base units), refused beyond the quantity's maximum."""
        if abs(number) > self.maximum:
            shown = f"{self.maximum / self.units[self.shown_in](1.0):g}{self.shown_in}"
            bound = f"at most {shown}" if number > 0 else f"at least -{shown}"
            raise ValueError(f"{written!r} is out of range: a {self.name} is {bound} (meshemu/limits.py)")
        return number

    def unit_list(self) -> str:
        return ", ".join(self.units)


def _scale(factor: float) -> Callable[[float], float]:
    return lambda number: number * factor


LENGTH = Quantity("length", "m", "200m", {"m": _scale(1.0), "km": _scale(1e3)}, limits.MAX_DISTANCE_M, "km")
TIME = Quantity("time", "ns", "20us", {"s": _scale(1e9), "ms": _scale(1e6), "us": _scale(1e3), "µs": _scale(1e3),
                                 "ns": _scale(1.0)}, limits.MAX_TIME_NS, "s")
RATE = Quantity("rate", "bps", "2Mbps", {"bps": _scale(1.0), "kbps": _scale(1e3), "Mbps": _scale(1e6),
                                  "Gbps": _scale(1e9), "B/s": _scale(8.0), "KB/s": _scale(8e3),
                                  "kB/s": _scale(8e3), "MB/s": _scale(8e6)}, limits.MAX_RATE_BPS, "Gbps")
SIZE = Quantity("size", "bytes", "1460B", {"B": _scale(1.0), "KB": _scale(1e3), "kB": _scale(1e3), "KiB": _scale(1024.0),
                                  "MB": _scale(1e6), "MiB": _scale(1024.0 * 1024.0)}, limits.MAX_SIZE_BYTES, "MiB")
POWER = Quantity("power", "dbm", "20dBm", {"dBm": _scale(1.0), "mW": _milliwatts_to_dbm,
                                    "W": lambda watts: _milliwatts_to_dbm(watts * 1e3)}, limits.MAX_LEVEL_DB, "dBm")
DECIBEL = Quantity("level in dB", "db", "10dB", {"dB": _scale(1.0)}, limits.MAX_LEVEL_DB, "dB")
GAIN = Quantity("gain", "dbi", "0dBi", {"dBi": _scale(1.0), "dB": _scale(1.0)}, limits.MAX_LEVEL_DB, "dBi")
FREQUENCY = Quantity("frequency", "hz", "2437MHz", {"Hz": _scale(1.0), "kHz": _scale(1e3), "MHz": _scale(1e6),
                                              "GHz": _scale(1e9)}, limits.MAX_FREQUENCY_HZ, "GHz")
SPEED = Quantity("speed", "mps", "10m/s", {"m/s": _scale(1.0), "km/h": _scale(1.0 / 3.6)}, limits.MAX_SPEED_MPS, "m/s")


def whole(value: float, what: str) -> int:
    """`value` as an integer, refusing a fraction (e.g. half a nanosecond)."""
    nearest = round(value)
    if abs(value - nearest) > 1e-6 * max(1.0, abs(value)):
        raise ValueError(f"{what} must be a whole number, got {value:g}")
    return int(nearest)


def coordinate(value: Any) -> float:
    """A position coordinate: a bare number (metres) or a length."""
    if isinstance(value, bool):
        raise ValueError("expected a coordinate in metres, got a boolean")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError("a coordinate must be a finite number")
        return LENGTH.within_limit(float(value), value)
    return LENGTH.parse(value)

