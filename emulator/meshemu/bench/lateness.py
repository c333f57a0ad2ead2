"""The medium's lateness over an interval, from two readings of its
cumulative histogram (the control socket's `lateness` op)."""

from __future__ import annotations

from typing import Any


def quantiles(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> dict[str, float]:
    """p50, p99 and the largest bucket's edge of the lateness between two
    readings of the histogram (bucket upper edges, µs)."""
    counts = [(bucket["lt_ns"], bucket["count"] - old["count"]) for bucket, old in zip(after, before)]
    total = sum(count for _, count in counts)

    def edge(fraction: float) -> float:
        seen = 0
        for lt_ns, count in counts:
            seen += count
            if total and seen >= fraction * total:
                return float("inf") if lt_ns is None else lt_ns / 1e3
        return 0.0

    return {"p50_us": edge(0.5), "p99_us": edge(0.99), "max_us": edge(1.0)}
