"""Confidence intervals and paired t-tests for runs repeated over seeds.

The CI is Student's t interval of the mean, mean ± t(1−α/2, n−1)·s/√n with
the sample standard deviation s; the paired t-test compares two variants run
on the same topologies and seeds (scipy.stats.ttest_rel, two-sided).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from scipy import stats as scipy_stats

CONFIDENCE = 0.90


@dataclass(frozen=True)
class Estimate:
    n: int
    mean: float
    stdev: float | None  # sample standard deviation; None for one value
    half_width: float | None  # of the confidence interval; None for one value

    @property
    def low(self) -> float | None:
        return None if self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.half_width is None else self.mean + self.half_width


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> Estimate:
    """The mean and its Student-t confidence interval."""
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = math.fsum(values) / n
    if n == 1:
        return Estimate(1, mean, None, None)
    stdev = math.sqrt(math.fsum((value - mean) ** 2 for value in values) / (n - 1))
    t = scipy_stats.t.ppf(1 - (1 - confidence) / 2, n - 1)
    return Estimate(n, mean, stdev, float(t * stdev / math.sqrt(n)))


@dataclass(frozen=True)
class PairedTest:
    n: int
    mean_difference: float  # mean of a − b
    difference_ci: Estimate  # of a − b
    t: float | None  # None when undefined (fewer than 2 pairs, or no variation)
    p: float | None


def paired_t_test(a: Sequence[float], b: Sequence[float], confidence: float = CONFIDENCE) -> PairedTest:
    """Two-sided paired t-test of a against b (pairs in the same order)."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length ({len(a)} and {len(b)})")
    differences = [x - y for x, y in zip(a, b)]
    estimate = mean_ci(differences, confidence)
    if len(differences) < 2 or estimate.stdev == 0:
        return PairedTest(len(differences), estimate.mean, estimate, None, None)
    result = scipy_stats.ttest_rel(a, b)
    return PairedTest(len(differences), estimate.mean, estimate, float(result.statistic), float(result.pvalue))
