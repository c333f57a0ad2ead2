"""Node placements of the topology generators (pure functions, metres)."""

from __future__ import annotations

import math
import random

Position = tuple[float, float, float]


def chain(n: int, spacing: float) -> list[Position]:
    """n nodes along x from the origin."""
    return [(i * spacing, 0.0, 0.0) for i in range(n)]


def grid(rows: int, cols: int, spacing: float) -> list[Position]:
    """rows x cols nodes, row-major: node r*cols + c at (c*spacing, r*spacing)."""
    return [(c * spacing, r * spacing, 0.0) for r in range(rows) for c in range(cols)]


def star(n: int, radius: float) -> list[Position]:
    """The centre at the origin, then n nodes evenly on a circle, the first on
    the positive x axis, counter-clockwise."""
    leaves = [(radius * math.cos(2 * math.pi * k / n), radius * math.sin(2 * math.pi * k / n), 0.0)
              for k in range(n)]
    return [(0.0, 0.0, 0.0)] + [(_clean(x), _clean(y), z) for x, y, z in leaves]


def uniform(rng: random.Random, n: int, low: tuple[float, float], high: tuple[float, float]) -> list[Position]:
    """n nodes uniformly in the rectangle [low, high]."""
    return [(rng.uniform(low[0], high[0]), rng.uniform(low[1], high[1]), 0.0) for _ in range(n)]


def _clean(value: float) -> float:
    """Round away floating-point dust (cos(pi/2) = 6e-17) so positions read well."""
    return round(value, 9) + 0.0
