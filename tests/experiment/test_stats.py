"""The experiment's statistics against values computed by hand and printed t tables."""

from __future__ import annotations

import math

import pytest

from coevolve_sdk.experiment.stats import describe, paired_difference, t_cdf, t_quantile

# two-sided 95% critical values of Student's t, from printed tables
T975 = {1: 12.7062, 2: 4.3027, 3: 3.1824, 4: 2.7764, 5: 2.5706, 9: 2.2622, 10: 2.2281, 30: 2.0423, 120: 1.9799}


@pytest.mark.parametrize("df,expected", sorted(T975.items()))
def test_t_quantile_matches_printed_tables(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=1e-4)


def test_t_cdf_closed_forms() -> None:
    # df=1 is the Cauchy law, df=2 has F(t) = 1/2 + t / (2 sqrt(2 + t^2))
    for t in (-3.0, -0.5, 0.0, 0.7, 4.0, 40.0):
        assert t_cdf(t, 1) == pytest.approx(0.5 + math.atan(t) / math.pi, abs=1e-12)
        assert t_cdf(t, 2) == pytest.approx(0.5 + t / (2 * math.sqrt(2 + t * t)), abs=1e-12)
    assert t_quantile(0.9, 1) == pytest.approx(math.tan(math.pi * 0.4), rel=1e-9)


def test_describe_three_values_by_hand() -> None:
    d = describe([0.2, 0.4, 0.6])
    # mean 0.4; deviations -0.2, 0, 0.2 -> variance 0.08 / 2 = 0.04 -> std 0.2
    assert d["n"] == 3 and d["mean"] == pytest.approx(0.4) and d["std"] == pytest.approx(0.2)
    half = 4.302653 * 0.2 / math.sqrt(3)
    assert d["ci95"] == pytest.approx([0.4 - half, 0.4 + half], abs=1e-5)


def test_describe_identical_values_has_a_zero_width_interval() -> None:
    d = describe([0.5, 0.5, 0.5, 0.5])
    assert d["std"] == 0.0 and d["ci95"] == [0.5, 0.5]


def test_one_value_says_there_is_no_interval() -> None:
    d = describe([0.7])
    assert d["mean"] == 0.7 and d["std"] is None and d["ci95"] is None and "one seed" in d["note"]
    assert describe([])["mean"] is None


def test_paired_difference_uses_common_seeds_only() -> None:
    arm = {"0": 0.5, "1": 0.6, "2": 0.9, "7": 1.0}
    base = {"0": 0.3, "1": 0.5, "2": 0.6, "3": 0.0}
    p = paired_difference(arm, base)
    assert p["seeds"] == pytest.approx({"0": 0.2, "1": 0.1, "2": 0.3})
    # diffs 0.2, 0.1, 0.3: mean 0.2, std 0.1, half-width t(2) * 0.1 / sqrt(3)
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert p["n"] == 3 and p["mean"] == pytest.approx(0.2) and p["std"] == pytest.approx(0.1)
    assert p["ci95"] == pytest.approx([0.2 - half, 0.2 + half], abs=1e-5)


def test_pairing_is_narrower_than_comparing_means() -> None:
    # a seed effect shared by both arms: unpaired intervals overlap, the paired one excludes 0
    base = {"0": 0.1, "1": 0.5, "2": 0.9}
    arm = {s: v + 0.05 + (0.01 if s == "1" else 0.0) for s, v in base.items()}
    a, b = describe(list(arm.values())), describe(list(base.values()))
    assert a["ci95"][0] < b["ci95"][1]
    p = paired_difference(arm, base)
    assert p["ci95"][0] > 0
