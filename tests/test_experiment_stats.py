"""CI and paired t-test against values computed by hand, and the report's
pairing of runs."""

from __future__ import annotations

import math

import pytest

from meshemu.experiment.report import Dataset, paired_tests
from meshemu.experiment.stats import mean_ci, paired_t_test


def test_ci_of_five_values_by_hand():
    # 2, 4, 4, 4, 5: mean 3.8, s² = (3.24 + 0.04·3 + 1.44)/4 = 1.2, s = 1.0954451;
    # t(0.95, 4) = 2.1318468 (tables); half width = 2.1318468 · 1.0954451 / √5 = 1.0443874.
    estimate = mean_ci([2, 4, 4, 4, 5])
    assert estimate.n == 5
    assert estimate.mean == pytest.approx(3.8)
    assert estimate.stdev == pytest.approx(math.sqrt(1.2))
    assert estimate.half_width == pytest.approx(1.0443874, rel=1e-6)
    assert (estimate.low, estimate.high) == pytest.approx((3.8 - 1.0443874, 3.8 + 1.0443874), rel=1e-6)


def test_ci_of_three_seeds_and_other_confidence():
    # 10, 12, 14: mean 12, s = 2; t(0.95, 2) = 2.9199856; hw = 2.9199856·2/√3 = 3.3717089.
    assert mean_ci([10, 12, 14]).half_width == pytest.approx(3.3717089, rel=1e-6)
    # 95%: t(0.975, 2) = 4.3026527; hw = 4.9682754.
    assert mean_ci([10, 12, 14], confidence=0.95).half_width == pytest.approx(4.9682754, rel=1e-6)


def test_one_value_has_no_interval_and_none_is_an_error():
    estimate = mean_ci([7.5])
    assert (estimate.mean, estimate.half_width, estimate.low) == (7.5, None, None)
    with pytest.raises(ValueError):
        mean_ci([])


def test_paired_t_test_by_hand():
    # Differences a − b: 1, 2, 0, 3, 2 -> mean 1.6, s² = (0.36 + 0.16 + 2.56 + 1.96 + 0.16)/4 = 1.3,
    # t = 1.6 / (√1.3/√5) = 3.1378581; two-sided p with 4 degrees of freedom = 0.034889 (t tables).
    a = [11, 14, 10, 16, 13]
    b = [10, 12, 10, 13, 11]
    test = paired_t_test(a, b)
    assert test.n == 5
    assert test.mean_difference == pytest.approx(1.6)
    assert test.t == pytest.approx(3.1378581, rel=1e-6)
    assert test.p == pytest.approx(0.034889, rel=1e-3)
    # 90% CI of the difference: 1.6 ± 2.1318468·√1.3/√5 = 1.6 ± 1.0870.
    assert test.difference_ci.half_width == pytest.approx(2.1318468 * math.sqrt(1.3) / math.sqrt(5), rel=1e-6)


def test_paired_t_test_sign_and_degenerate_cases():
    assert paired_t_test([1, 2, 3], [2, 3, 5]).t < 0
    constant = paired_t_test([2, 3, 4], [1, 2, 3])  # every difference is 1: no variation
    assert (constant.mean_difference, constant.t, constant.p) == (1, None, None)
    with pytest.raises(ValueError):
        paired_t_test([1, 2], [1])


def chain_runs(goodput: dict[tuple[int, str], list[float]]) -> Dataset:
    """Runs of a sweep over chain length n and mode, seeds 1, 2, 3, ..."""
    return Dataset([{"run_id": f"{n}-{mode}-{seed}", "seed": seed,
                     "params": {"topology.generate.n": n, "traffic.0.mode": mode},
                     "metrics": {"flows": [{"name": "flow", "goodput_bps": value}]}}
                    for (n, mode), values in goodput.items() for seed, value in enumerate(values, start=1)])


def test_paired_tests_pair_runs_of_the_same_other_values_and_seed():
    # re-tfrc − tfrc per seed: n=5 -10, -9, -11 (mean -10, s = 1, t = -10·√3 = -17.320508);
    # n=8 +20, +19, +21 (t = 20·√3 = 34.641016). Pooled: mean 5, s² = 1354/5,
    # t = 5/(√270.8/√6) = 0.7442542. The fourth n=8 re-tfrc run has no partner.
    data = chain_runs({(5, "tfrc"): [100, 110, 120], (5, "re-tfrc"): [90, 101, 109],
                       (8, "tfrc"): [180, 231, 279], (8, "re-tfrc"): [200, 250, 300, 999]})
    pooled_only = paired_tests(data, ["flows.flow.goodput_bps"], "mode")
    assert [(t["a"], t["b"], t["within"], t["pairs"]) for t in pooled_only] == [("re-tfrc", "tfrc", "all", 6)]
    assert pooled_only[0]["mean_difference"] == pytest.approx(5)
    assert pooled_only[0]["t"] == pytest.approx(0.7442542, rel=1e-6)
    # Per chain length the opposite signs show, which the pooled test hides.
    tests = paired_tests(data, ["flows.flow.goodput_bps"], "mode", within="n")
    assert [(t["within"], t["pairs"]) for t in tests] == [("all", 6), (5, 3), (8, 3)]
    assert tests[0] == pooled_only[0]
    assert [t["mean_difference"] for t in tests[1:]] == pytest.approx([-10, 20])
    assert [t["t"] for t in tests[1:]] == pytest.approx([-17.320508, 34.641016], rel=1e-6)
    assert all(t["p"] < 0.01 for t in tests[1:]) and tests[0]["p"] > 0.4
