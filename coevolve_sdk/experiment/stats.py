"""Small-sample statistics for comparing arms over seeds, with no dependency beyond the stdlib.

An experiment has a handful of seeds per arm, so intervals use Student's t rather than the
normal approximation (with 3 seeds the t quantile is 4.30, not 1.96: the difference decides
whether a gain is believable). scipy is not a dependency of the core, so the t quantile is
computed here from the regularised incomplete beta function.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["t_quantile", "t_cdf", "describe", "paired_difference"]


def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function, evaluated with Lentz's method."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _reg_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularised incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = a * math.log(x) + b * math.log1p(-x) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    # the fraction converges fast only below the mean of the beta law; use the symmetry above it
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"Student's t needs at least 1 degree of freedom, got {df}")
    tail = 0.5 * _reg_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t (bisection on the CDF, to 1e-12)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"a quantile needs 0 < p < 1, got {p}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def describe(values: Sequence[float], confidence: float = 0.95) -> dict[str, Any]:
    """n, mean, sample standard deviation and the Student-t interval of the mean.

    With one value there is no spread to estimate: ``std`` and ``ci95`` are None and ``note``
    says so, rather than reporting a zero-width interval that would look like certainty."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return {"n": 0, "mean": None, "std": None, "ci95": None, "note": "no finished run"}
    mean = math.fsum(xs) / n
    if n == 1:
        return {"n": 1, "mean": mean, "std": None, "ci95": None, "note": "one seed: no interval"}
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * std / math.sqrt(n)
    return {"n": n, "mean": mean, "std": std, "ci95": [mean - half, mean + half], "note": ""}


def paired_difference(arm: Mapping[str, float], baseline: Mapping[str, float]) -> dict[str, Any]:
    """Per-seed differences arm − baseline over the seeds both have, and their statistics.

    Pairing by seed removes what the seed does to both arms alike (the seed pool, the
    initial weights), so the interval is usually much narrower than comparing two means."""
    common = [s for s in arm if s in baseline]
    diffs = {s: float(arm[s]) - float(baseline[s]) for s in common}
    return {"seeds": diffs, **describe(list(diffs.values()))}


def seeds_for_power(sd: float, effect: float, power: float = 0.8, confidence: float = 0.95, max_seeds: int = 10_000) -> int | None:
    """How many seeds a paired comparison needs so that a true mean difference of ``effect``
    gives a ``confidence`` interval above zero with probability ``power``, when the per-seed
    differences have standard deviation ``sd`` (read from a previous experiment).

    The usual approximation for a one-sample t-test: the smallest n with
    ``sqrt(n) * effect / sd >= t(confidence, n-1) + t(power, n-1)`` (two-sided interval), at least
    2. Why a function: an experiment is sized before it runs, and the size should come from the
    numbers, not from arithmetic done by hand. None when ``effect`` is not positive or no n up to
    ``max_seeds`` is enough."""
    if effect <= 0 or sd < 0 or not 0 < power < 1 or not 0 < confidence < 1:
        return None
    if sd == 0:
        return 2
    for n in range(2, max_seeds + 1):
        need = t_quantile(0.5 + confidence / 2.0, n - 1) + t_quantile(power, n - 1)
        if math.sqrt(n) * effect / sd >= need:
            return n
    return None
