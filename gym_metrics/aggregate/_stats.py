"""Grouped descriptive statistics over sorted columns, all in numpy.

Rows arrive sorted by group, so every group is a contiguous slice. Values that are absent or
non-finite are "invalid" and left out, as pandas' skipna does for NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gym_metrics.statistics import t_quantile


@dataclass
class GroupedStats:
    """Per-group stats of one field; NaN where a stat is undefined for a group."""

    count: np.ndarray
    mean: np.ndarray
    min: np.ndarray
    max: np.ndarray
    median: np.ndarray
    std: np.ndarray
    """Sample standard deviation (ddof=1); NaN when count < 2."""
    quantiles: dict[float, np.ndarray]
    """Per q asked for (0.5 always), each group's q-quantile (numpy's linear interpolation)."""
    starts: np.ndarray
    total: np.ndarray
    """Sum of the valid values (for clustered standard errors)."""
    m2: np.ndarray
    """Sum of squared deviations from the group mean (for the within-task variance)."""


def group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Start position of each run of equal keys in a sorted array."""
    if len(sorted_keys) == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    return np.concatenate(([0], change)).astype(np.int64)


def grouped_stats(
    values: np.ndarray, valid: np.ndarray, group_ids: np.ndarray, starts: np.ndarray, quantiles: tuple[float, ...] = ()
) -> GroupedStats:
    """Stats of `values[valid]` per group; rows are sorted so that group g is contiguous.
    `quantiles`: those wanted besides the median."""
    n_groups = len(starts)
    every = bool(valid.all())  # the usual case: no masks to apply
    count, total, mean, m2, std, _ = _sums(values, valid, every, group_ids, starts)
    empty = count == 0
    if n_groups:
        low = np.minimum.reduceat(values if every else np.where(valid, values, np.inf), starts)
        high = np.maximum.reduceat(values if every else np.where(valid, values, -np.inf), starts)
    else:
        low = high = np.zeros(0)
    low[empty] = np.nan
    high[empty] = np.nan
    qs = group_quantiles(values, valid, starts, count, (0.5, *quantiles))
    return GroupedStats(count, mean, low, high, qs[0.5], std, qs, starts, total, m2)


GroupSums = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]
"""Per group: count, total, mean, m2, std; and whether a sum overflowed and was rescaled."""


def group_sums(values: np.ndarray, valid: np.ndarray, group_ids: np.ndarray, starts: np.ndarray) -> GroupSums:
    """The sums `grouped_stats` computes, alone (for the merge, which needs them for every
    task before it needs the rest, a range of tasks at a time; see _ranged)."""
    return _sums(values, valid, bool(valid.all()), group_ids, starts)


def _sums(values: np.ndarray, valid: np.ndarray, every: bool, group_ids: np.ndarray, starts: np.ndarray) -> GroupSums:
    """Sums in row order (np.bincount adds in order), so a group's sums do not depend on the
    other groups in the call, unless some group's sum overflows: then every group of the call
    is rescaled (the last item says so)."""
    n_groups = len(starts)
    count = np.bincount(group_ids, minlength=n_groups).astype(np.float64) if every else np.bincount(group_ids, valid, n_groups)
    clean = values if every else np.where(valid, values, 0.0)
    total = np.bincount(group_ids, weights=clean, minlength=n_groups)
    rescaled = False
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = total / count
        if not np.isfinite(mean[count > 0]).all():  # sums past 1.8e308: rescale
            rescaled = True
            scale = _group_max_abs(clean, starts)
            mean = np.bincount(group_ids, weights=clean / scale[group_ids], minlength=n_groups) / count * scale
        dev = values - mean[group_ids]
        if not every:
            dev[~valid] = 0.0
        m2 = np.bincount(group_ids, weights=dev * dev, minlength=n_groups)
        std = np.sqrt(m2 / (count - 1))
        if not np.isfinite(std[count >= 2]).all():  # squares past 1.8e308: rescale
            rescaled = True
            scale = _group_max_abs(dev, starts)
            z = dev / scale[group_ids]
            std = np.sqrt(np.bincount(group_ids, weights=z * z, minlength=n_groups) / (count - 1)) * scale
    std[count < 2] = np.nan
    return count, total, mean, m2, std, rescaled


def group_quantiles(
    values: np.ndarray, valid: np.ndarray, starts: np.ndarray, count: np.ndarray, qs: tuple[float, ...]
) -> dict[float, np.ndarray]:
    """Each group's q-quantiles. Groups of one size with every value valid (the usual tasks x
    repeats) are rows of a matrix, sorted when short and partitioned at the few order
    statistics needed when long (the whole agent, one repeat across tasks): no full sort."""
    n, n_groups = len(values), len(starts)
    width = n // n_groups if n_groups else 0
    if not width or width * n_groups != n or not valid.all() or not np.array_equal(starts, np.arange(0, n, width)):
        sorted_values = sort_within_groups(np.where(valid, values, np.inf), starts)
        return {q: quantile_sorted(sorted_values, starts, count, q) for q in qs}
    matrix = values.reshape(n_groups, width)
    ranks = {q: _ranks(q, width) for q in qs}
    if width <= 64:
        ordered = np.sort(matrix, axis=1)
    else:
        ordered = np.partition(matrix, sorted({k for lo, hi, _ in ranks.values() for k in (lo, hi)}), axis=1)
    c = np.full(n_groups, width, dtype=np.int64)
    return {q: _lerp(ordered[:, lo], ordered[:, hi], t, c, q) for q, (lo, hi, t) in ranks.items()}


def _ranks(q: float, count: int) -> tuple[int, int, float]:
    """The order statistics (lo, hi) a q-quantile of `count` values interpolates, and the weight."""
    pos = q * (count - 1)
    lo = math.floor(pos)
    return lo, min(lo + 1, count - 1), pos - lo


def _group_max_abs(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    scale = np.maximum.reduceat(np.abs(values), starts) if len(starts) else np.zeros(0)
    scale[~(scale > 0) | ~np.isfinite(scale)] = 1.0
    return scale


def sort_within_groups(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Each contiguous group's values sorted ascending (invalid ones are +inf, so last).

    Groups of similar size (the usual tasks x repeats) are sorted as rows of a padded matrix,
    several times faster than a lexsort; very uneven groups fall back to the lexsort.
    """
    n, n_groups = len(values), len(starts)
    if n_groups <= 1:
        return np.sort(values)
    sizes = np.diff(np.append(starts, n))
    width = int(sizes.max())
    if n_groups * width > 4 * n + 1024:
        group_ids = np.repeat(np.arange(n_groups), sizes)
        return values[np.lexsort((values, group_ids))]
    matrix = np.full((n_groups, width), np.inf)
    cols = np.arange(n) - np.repeat(starts, sizes)
    rows = np.repeat(np.arange(n_groups), sizes)
    matrix[rows, cols] = values
    matrix.sort(axis=1)
    return matrix[rows, cols]


def quantile_sorted(sorted_values: np.ndarray, starts: np.ndarray, count: np.ndarray, q: float) -> np.ndarray:
    """Per-group quantile with numpy's default linear interpolation (pandas' too)."""
    c = count.astype(np.int64)
    out = np.full(len(starts), np.nan)
    ok = c > 0
    if not ok.any():
        return out
    pos = q * (c[ok] - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, c[ok] - 1)
    out[ok] = _lerp(sorted_values[starts[ok] + lo], sorted_values[starts[ok] + hi], pos - lo, c[ok], q)
    return out


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray | float, c: np.ndarray, q: float) -> np.ndarray:
    """The q-quantile between order statistics a <= b at weight t, of groups of c values."""
    with np.errstate(over="ignore", invalid="ignore"):
        diff = b - a
        # numpy's _lerp: symmetric form keeps results exact at the ends
        value = np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)
        if q == 0.5:  # a median of an even count is the mean of the two middle values
            value = np.where(c % 2 == 0, (a + b) / 2, value)
        bad = ~np.isfinite(value)
        if bad.any():  # |values| near the float64 limit: the same quantities without overflow
            value[bad] = np.broadcast_to(a * (1 - t) + b * t if q != 0.5 else a / 2 + b / 2, value.shape)[bad]
    return np.asarray(value, dtype=np.float64)


@lru_cache(maxsize=4096)
def t_critical(df: int, confidence: float = 0.95) -> float:
    """Two-sided Student-t critical value (scipy.stats.t.interval's multiplier), without scipy."""
    return t_quantile(df, 0.5 + confidence / 2)


def t_interval(mean: float, se: float, n: int) -> tuple[float, float] | None:
    """95% Student-t interval as NeMo Gym reports it: None for n <= 1, a point when se == 0."""
    if n <= 1:
        return None
    if se == 0:
        return mean, mean
    half = t_critical(n - 1) * se
    low, high = mean - half, mean + half
    return (low, high) if math.isfinite(low) and math.isfinite(high) else None
