"""Intervals for reducer values: Student t for macro means, Wilson for rates, a seeded
bootstrap where no closed form fits. Every function returns an Interval with `None` where
the quantity is undefined (too few observations), never NaN."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gym_metrics._util.unique import unique_counts
from gym_metrics.aggregate import t_interval

CONFIDENCE = 0.95
DEFAULT_SEED = 0
"""Bootstrap seed: the same rewards always give the same interval."""
DEFAULT_RESAMPLES = 2000


@dataclass(frozen=True)
class Interval:
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    method: str


@lru_cache(maxsize=8)
def normal_critical(confidence: float = CONFIDENCE) -> float:
    """Two-sided standard-normal critical value (1.959964 for 95%)."""
    from scipy.special import ndtri  # lazily, as _stats does for stdtrit

    return float(ndtri(0.5 + confidence / 2))


def t_mean(values: np.ndarray) -> Interval:
    """Mean of independent observations (one per task): se = s / sqrt(n), Student-t interval."""
    n = len(values)
    if n < 2:
        return Interval(None, None, None, "t")
    mean = float(values.mean())
    se = float(values.std(ddof=1)) / math.sqrt(n)
    low, high = t_interval(mean, se, n) or (None, None)
    return Interval(se, low, high, "t")


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval:
    """Wilson score interval for a binomial proportion: stays inside [0, 1] and is honest at
    0/n and n/n, where the normal (Wald) interval collapses to a point. stderr is the usual
    sqrt(p (1 - p) / n)."""
    if n < 1:
        return Interval(None, None, None, "wilson")
    p = successes / n
    z = normal_critical(confidence)
    z2n = z * z / n
    center = (p + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(p * (1 - p) / n + z2n / (4 * n)) / (1 + z2n)
    low = 0.0 if successes == 0 else max(0.0, center - half)  # exact ends: 1 - 1e-16 reads badly
    high = 1.0 if successes == n else min(1.0, center + half)
    return Interval(math.sqrt(p * (1 - p) / n), low, high, "wilson")


def bootstrap_mean(
    values: np.ndarray, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES, confidence: float = CONFIDENCE
) -> Interval:
    """Percentile bootstrap of the mean over tasks (tasks resampled with replacement).

    A resample's mean only depends on how often each distinct value was drawn, so when the
    values are few (per-task estimates from n samples take at most (n+1)(n+2)/2 values) the
    draws are multinomial counts over them: the same distribution as resampling tasks, at a
    cost of resamples x distinct values instead of resamples x tasks.
    """
    n = len(values)
    if n < 2:
        return Interval(None, None, None, "bootstrap")
    distinct, counts = unique_counts(values)
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    few = len(distinct) * 8 <= n  # a binomial draw per value costs about 8 index draws
    chunk = max(1, (1 << 22) // (len(distinct) if few else n))  # about 32 MB at a time
    for lo in range(0, resamples, chunk):
        size = min(chunk, resamples - lo)
        if few:
            means[lo : lo + size] = rng.multinomial(n, counts / n, size=size) @ distinct / n
        else:
            means[lo : lo + size] = values[rng.integers(0, n, size=(size, n))].mean(axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(means, [alpha, 1 - alpha])
    return Interval(float(means.std(ddof=1)), float(low), float(high), "bootstrap")
