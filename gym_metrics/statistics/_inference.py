"""Tests and intervals for comparing agents: the paired clustered difference, McNemar's exact
test, the Wilson interval, and Holm / Benjamini-Hochberg adjusted p-values.

Pairing by task is what makes a comparison sensitive: tasks differ in difficulty far more than
agents do, and the per-task difference cancels that difficulty out (Miller 2024, section 4).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from gym_metrics.statistics._cluster import CONFIDENCE, t_interval


@dataclass(frozen=True)
class PairedDifference:
    """value_a - value_b over the same tasks, with a clustered standard error and a t test."""

    value_a: float
    value_b: float
    difference: float
    standard_error: float
    ci_low: float
    ci_high: float
    df: int
    """Tasks - 1."""
    t_statistic: float
    p_value: float
    """Two-sided, H0: no difference."""
    tasks: int
    confidence: float = CONFIDENCE

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


NO_SPREAD = 1e-12
"""A standard error this small relative to the values is float rounding: no spread."""


def paired_difference(
    a: np.ndarray,
    b: np.ndarray,
    a_weights: np.ndarray | None = None,
    b_weights: np.ndarray | None = None,
    confidence: float = CONFIDENCE,
) -> PairedDifference:
    """sum(a) / sum(a_weights) - sum(b) / sum(b_weights), entry i of every array being task i.

    Each agent's value is a ratio over tasks (weights 1: the mean of per-task values; task sums
    over rollout counts: the mean over rollouts). Task i contributes
    u_i = (a_i - V_a * wa_i) / W_a - (b_i - V_b * wb_i) / W_b, and
    se = sqrt(n / (n - 1) * sum_i u_i^2): the clustered standard error of the difference, which
    for weights 1 is sd(a_i - b_i) / sqrt(n), the paired t test (scipy's ttest_rel). The
    interval and p-value use Student t with n - 1 degrees of freedom.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    wa = np.ones_like(a) if a_weights is None else np.asarray(a_weights, dtype=np.float64)
    wb = np.ones_like(b) if b_weights is None else np.asarray(b_weights, dtype=np.float64)
    n = len(a)
    if not len(b) == len(wa) == len(wb) == n:
        raise ValueError("a paired difference needs the same tasks, in the same order, for both agents")
    if n < 2:
        raise ValueError(f"a paired difference needs at least 2 tasks, got {n}")
    total_a, total_b = float(wa.sum()), float(wb.sum())
    va, vb = float(a.sum()) / total_a, float(b.sum()) / total_b
    u = (a - va * wa) / total_a - (b - vb * wb) / total_b
    # np.square().sum(), not np.dot: BLAS picks its summation order by CPU (and OPENBLAS_CORETYPE),
    # so a dot product makes the output differ in the last bit from machine to machine.
    se = math.sqrt(n / (n - 1) * float(np.square(u).sum()))
    if se <= NO_SPREAD * max(1.0, abs(va), abs(vb)):  # rounding's spread (a + 0.1 against a), not the data's
        se = 0.0
    diff = va - vb
    t, p = _t_test(diff, se, n - 1)
    low, high = t_interval(diff, se, n - 1, confidence) if se > 0 else (math.nan, math.nan)
    return PairedDifference(va, vb, diff, se, low, high, n - 1, t, p, n, confidence)


def _t_test(estimate: float, se: float, df: int) -> tuple[float, float]:
    """(t, two-sided p) for H0: the estimate's expectation is 0. A zero se (every task's
    difference the same: two tasks A failed and B passed, or agents alike on every task) says
    nothing of the spread the test needs: no t, no p (NaN; scipy's ttest_rel gives inf and 0,
    or NaN), never a certain 0 or 1."""
    if se == 0:
        return math.nan, math.nan
    from scipy.special import stdtr

    t = estimate / se
    return t, float(min(1.0, 2.0 * stdtr(df, -abs(t))))


@dataclass(frozen=True)
class McNemar:
    """McNemar's exact test on paired binary outcomes (one rollout per task per agent)."""

    only_a: int
    """Tasks A passed and B failed."""
    only_b: int
    p_value: float
    """min(1, 2 * P(X <= min(only_a, only_b))), X ~ Binomial(only_a + only_b, 1/2)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mcnemar_exact(a: np.ndarray, b: np.ndarray) -> McNemar:
    """Exact McNemar test: under H0 each discordant task is equally likely to favour either
    agent, so the count favouring A among the discordant ones is Binomial(n, 1/2). Ties
    (both pass, both fail) carry no information about the difference."""
    pa, pb = np.asarray(a) != 0, np.asarray(b) != 0
    only_a, only_b = int(np.count_nonzero(pa & ~pb)), int(np.count_nonzero(pb & ~pa))
    n = only_a + only_b
    if n == 0:
        return McNemar(0, 0, 1.0)
    from scipy.special import bdtr

    return McNemar(only_a, only_b, float(min(1.0, 2.0 * bdtr(min(only_a, only_b), n, 0.5))))


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a proportion p = successes / n with z = Phi^-1((1 + confidence) / 2):
    (p + z^2 / 2n -/+ z sqrt(p (1 - p) / n + z^2 / 4n^2)) / (1 + z^2 / n). Stays in [0, 1]
    and is honest at 0 / n and n / n, where the normal interval collapses to a point."""
    if n < 1:
        return math.nan, math.nan
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = successes / n
    z2 = z * z
    center = (successes + z2 / 2) / (n + z2)
    half = z * math.sqrt(n * p * (1 - p) + z2 / 4) / (n + z2)
    return center - half, center + half


def _tested(adjust: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """`adjust` over the tests that were made (finite p), m their count; an undefined p (NaN:
    no spread to test) stays NaN and takes no share of the family."""

    def over_tested(p_values: np.ndarray) -> np.ndarray:
        p = np.asarray(p_values, dtype=np.float64)
        made = np.isfinite(p)
        if made.all():
            return adjust(p)
        out = np.full(len(p), np.nan)
        out[made] = adjust(p[made])
        return out

    over_tested.__doc__ = adjust.__doc__
    return over_tested


@_tested
def holm(p_values: np.ndarray) -> np.ndarray:
    """Holm's step-down adjusted p-values (family-wise error control, any dependence): sorted
    ascending, p_(i) * (m - i + 1) for i = 1..m, made non-decreasing and capped at 1."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = scaled
    return out


@_tested
def benjamini_hochberg(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (false discovery rate control): sorted ascending,
    p_(i) * m / i, made non-decreasing from the largest down and capped at 1."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    scaled = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    out = np.empty(m)
    out[order] = scaled
    return out


ADJUSTMENTS = {"holm": holm, "bh": benjamini_hochberg}
"""--adjust choices: Holm (family-wise error rate) or Benjamini-Hochberg (false discovery rate)."""
