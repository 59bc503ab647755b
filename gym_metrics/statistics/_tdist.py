"""Student-t quantiles in pure Python, identical on every Python, numpy and scipy version.

NeMo Gym's confidence intervals use scipy.stats.t.ppf. scipy's stdtrit changed implementation
(Cephes up to scipy 1.15, the last release for Python 3.10; Boost since 1.16), and the two differ
by up to ~5e-11 relative; `mean - t * se` can magnify that past the 1e-9 conformance tolerance.
Here the quantile is within 1e-14 relative of the exact value at 95% and 99% (a few ulps at 95%;
tests/aggregate/test_tdist.py holds exact values from mpmath), so it matches scipy >= 1.16, NeMo
Gym 0.7.0's reference, on every Python, and the hot path does not import scipy. The aggregate
engine and the statistics package share this one copy.

Integer degrees of freedom only (an interval over n values has n - 1). df 1 and 2 have closed
forms; up to `EXACT_DF`, Newton's method on the exact finite-series CDF (Abramowitz & Stegun
26.7.3-4); above it, the Cornish-Fisher expansion (A&S 26.7.5), whose first omitted term is
below 1e-15 relative there for confidence up to 99.9%.
"""

from __future__ import annotations

import math
from functools import lru_cache
from statistics import NormalDist

EXACT_DF = 2000
_MAX_NEWTON_STEPS = 60


def t_quantile(df: int, p: float) -> float:
    """The p-quantile of Student's t with `df` degrees of freedom (scipy.stats.t.ppf(p, df))."""
    if isinstance(df, bool) or df != int(df) or df < 1:
        raise ValueError(f"df must be a positive integer, got {df!r}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p!r}")
    df = int(df)
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(df, 1.0 - p)
    if p == 1.0:
        return math.inf
    q = 1.0 - p  # exact for p >= 0.5 (Sterbenz)
    if df == 1:
        return 1.0 / math.tan(math.pi * q)
    if df == 2:
        return (1.0 - 2.0 * q) / math.sqrt(2.0 * q * (1.0 - q))
    guess = _cornish_fisher(df, NormalDist().inv_cdf(p))
    if df > EXACT_DF:
        return guess
    return _newton(df, 1.0 - 2.0 * q, guess)


def _cornish_fisher(df: int, z: float) -> float:
    """A&S 26.7.5: t ~ z + g1/df + g2/df^2 + g3/df^3 + g4/df^4."""
    z2 = z * z
    g1 = z * (z2 + 1) / 4
    g2 = z * ((5 * z2 + 16) * z2 + 3) / 96
    g3 = z * (((3 * z2 + 19) * z2 + 17) * z2 - 15) / 384
    g4 = z * ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) / 92160
    return z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df


def _newton(df: int, central: float, t: float) -> float:
    """Solve P(|T| <= t) = central from `t`, a close positive guess."""
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    for _ in range(_MAX_NEWTON_STEPS):
        density = 2.0 * math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))
        step = (central - _central_cdf(df, t)) / density
        t_next = t + step if t + step > 0 else t / 2
        if abs(t_next - t) <= 4 * math.ulp(t):
            return t_next
        t = t_next
    return t


def _central_cdf(df: int, t: float) -> float:
    """P(|T| <= t) for t > 0 and integer df >= 3, as a finite series in cos^2(theta).

    cos^2k is exp(k * log1p(-sin^2)): powers of a rounded cos^2 would carry k times its rounding
    error, about 1e-13 at k = 1000. The coefficients are correctly rounded (_coefficients).
    """
    s = df + t * t
    log_cos2 = math.log1p(-(t * t) / s)
    coefficients = _coefficients(df % 2)[: df // 2]
    total = math.fsum(c * math.exp(k * log_cos2) for k, c in enumerate(coefficients))
    if df % 2 == 0:  # sin(theta) * sum_k (2k-1)!!/(2k)!! cos^2k(theta)
        return t / math.sqrt(s) * total
    # odd: (2/pi) * (theta + sin(theta) cos(theta) * sum_k (2k)!!/(2k+1)!! cos^2k(theta))
    return 2.0 / math.pi * (math.atan2(t, math.sqrt(df)) + t * math.sqrt(df) / s * total)


@lru_cache(maxsize=2)
def _coefficients(odd: int) -> tuple[float, ...]:
    """(2k-1)!!/(2k)!! = C(2k, k) / 4^k (even df) or its reciprocal / (2k+1) (odd df), k < EXACT_DF / 2.

    Computed in integers and divided once, so each is correctly rounded; a float recurrence would
    accumulate a rounding error per step.
    """
    out = []
    central = 1  # C(2k, k)
    for k in range(EXACT_DF // 2):
        out.append((1 << 2 * k) / ((2 * k + 1) * central) if odd else central / (1 << 2 * k))
        central = central * (2 * k + 1) * (2 * k + 2) // ((k + 1) * (k + 1))
    return tuple(out)
