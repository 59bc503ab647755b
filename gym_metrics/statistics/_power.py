"""Power of the paired t test: the smallest difference a design can detect, and the number of
tasks a planned comparison needs (Miller 2024, section 5: power analysis before the run).

The paired comparison is a one-sample t test on per-task differences d_i, so its power is that
of statsmodels' `TTestPower` with effect size delta / sd(d): with df = n - 1, nc = es sqrt(n) and
c = t_{1 - alpha/2, df}, power = P(T'(df, nc) > c) + P(T'(df, nc) < -c), T' noncentral t.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist

ALPHA = 0.05
POWER = 0.8


def ttest_power(effect_size: float, nobs: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided one-sample (or paired) t test for a standardized effect size."""
    from scipy.special import nctdtr, stdtrit

    df = nobs - 1
    crit = -float(stdtrit(df, alpha / 2))
    nc = effect_size * math.sqrt(nobs)

    def cdf(t: float) -> float:
        """scipy's noncentral t CDF, which is NaN deep in a tail: there it is 0 below the
        centre (t far under nc) and 1 above it."""
        value = float(nctdtr(df, nc, t))
        return value if math.isfinite(value) else (0.0 if t < nc else 1.0)

    return 1.0 - cdf(crit) + cdf(-crit)


def _solve_increasing(func: Callable[[float], float], low: float, high: float) -> float:
    """The root of an increasing function on [low, inf), doubling `high` until it brackets."""
    from scipy.optimize import brentq

    while func(high) < 0:
        low, high = high, high * 2
        if high > 1e12:
            return math.inf
    return float(brentq(func, low, high, xtol=1e-14, rtol=1e-15, maxiter=500))


def effect_size_for_power(nobs: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The standardized effect size (delta / sd) the test detects with probability `power`
    from `nobs` paired observations (statsmodels `TTestPower().solve_power(effect_size=None)`)."""
    if nobs < 2:
        return math.nan
    if ttest_power(0.0, nobs, alpha) >= power:  # alpha >= power: no effect at all already "detected" that often
        return 0.0
    normal = NormalDist().inv_cdf
    guess = (-normal(alpha / 2) + normal(power)) / math.sqrt(nobs)  # the large-sample answer (1 - 1e-17 is 1.0 in floats)
    return _solve_increasing(lambda d: ttest_power(d, nobs, alpha) - power, 0.0, 2 * guess)


def nobs_for_power(effect_size: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The (fractional) number of paired observations that detects `effect_size` with
    probability `power` (statsmodels `TTestPower().solve_power(nobs=None)`); round it up."""
    if not effect_size > 0:
        return math.inf
    def shortfall(n: float) -> float:
        return ttest_power(effect_size, n, alpha) - power

    if shortfall(2.0) >= 0:
        return 2.0
    return _solve_increasing(shortfall, 2.0, 4.0)


def minimum_detectable_effect(tasks: int, sd_difference: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """MDE = es(tasks, alpha, power) * sd(d): the true difference a paired test over `tasks`
    tasks detects with probability `power`, sd(d) being the per-task differences' spread."""
    return effect_size_for_power(tasks, alpha, power) * sd_difference


@dataclass(frozen=True)
class PlanRow:
    """One design of a planned paired comparison."""

    repeats: int
    sd_difference: float
    """sqrt(between + within / repeats): the spread of per-task differences at this many repeats."""
    tasks: int | None
    """Tasks needed (None: more than any finite number, e.g. a zero target)."""
    rollouts_per_agent: int | None


def difference_sd(between: float, within: float, repeats: float) -> float:
    """sd of a per-task difference of two agents' means over `repeats` rollouts each:
    sqrt(between + within / repeats), `between` the variance of the true per-task differences
    and `within` the sum of the two agents' within-task variances."""
    return math.sqrt(between + within / repeats)


def plan(
    between: float,
    within: float,
    mde: float,
    repeats: list[int],
    alpha: float = ALPHA,
    power: float = POWER,
) -> list[PlanRow]:
    """Tasks needed at each number of repeats to detect a true difference `mde`."""
    rows = []
    for k in repeats:
        sd = difference_sd(between, within, k)
        n = nobs_for_power(mde / sd, alpha, power) if sd > 0 else 2.0
        tasks = math.ceil(n - 1e-9) if math.isfinite(n) else None
        rows.append(PlanRow(k, sd, tasks, None if tasks is None else tasks * k))
    return rows
