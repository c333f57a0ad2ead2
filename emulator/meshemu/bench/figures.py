"""How the benchmarks take their lists and print their spreads."""

from __future__ import annotations

import statistics


def spread(values: list[float], digits: int) -> str:
    """min/median/max."""
    return "/".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values), max(values)))


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]
