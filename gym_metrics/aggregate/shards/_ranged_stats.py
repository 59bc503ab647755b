"""The merge's statistics in bounded memory: the same numbers as the one-process engine's
(_engine), bit for bit, computed a slice of rows at a time instead of over copies of whole
columns.

Bit-identity rests on one fact: np.bincount adds its weights in row order, one after the
other, so a sum carried from one slice into the next (np.bincount over [carry, *slice])
is the sum one call over every row makes. Per-task sums involve only that task's rows, so
a range of whole tasks gives each task the sums the whole call gives; the exception is an
overflow (a sum past 1.8e308), after which the engine rescales every group of the call:
then the field is computed over all rows at once, exactly as the engine does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gym_metrics.rollouts import RolloutColumns
from gym_metrics.aggregate._repeats import PerField, repeat_entries, repeat_level_entries
from gym_metrics.aggregate._stats import GroupedStats, group_quantiles, group_sums, grouped_stats
from gym_metrics.aggregate._uncertainty import FieldSpread, spread_of

SLICE_ROWS = 1 << 20
"""Rows per slice of the chunked sums (8 MB of float64)."""


@dataclass
class Tasks:
    """The measured rows' tasks: where each starts (rows sorted by key) and its size."""

    starts: np.ndarray
    sizes: np.ndarray

    def ranges(self, rows: int) -> Iterator[tuple[int, int, int, int]]:
        """(first task, end task, first row, end row) of consecutive ranges of whole tasks of
        about `rows` rows (a task larger than that is a range of its own)."""
        n = len(self.starts)
        ends = np.append(self.starts[1:], self.starts[-1] + self.sizes[-1]) if n else self.starts
        g = 0
        while g < n:
            a = int(self.starts[g])
            h = max(g + 1, int(np.searchsorted(ends, a + rows, side="right")))
            yield g, h, a, int(ends[h - 1])
            g = h

    def local(self, g: int, h: int) -> tuple[np.ndarray, np.ndarray]:
        """Group ids and starts of tasks g..h, numbered from 0 in their own rows."""
        sizes, starts = self.sizes[g:h], self.starts[g:h]
        return np.repeat(np.arange(h - g), sizes), starts - starts[0] if len(starts) else starts


def task_spread(values: np.ndarray, valid: np.ndarray, tasks: Tasks, rows: int) -> tuple[FieldSpread, GroupedStats | None]:
    """A field's spread over tasks (`field_spread` of the group level's stats), from per-task
    sums made a range of tasks at a time; and, when some sum overflowed (see the module's
    docstring), the field's group stats computed over all rows as the engine does (else None)."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    for g, h, a, b in tasks.ranges(rows):
        ids, starts = tasks.local(g, h)
        count, total, mean, m2, _, rescaled = group_sums(values[a:b], valid[a:b], ids, starts)
        if rescaled:
            whole = grouped_stats(values, valid, np.repeat(np.arange(len(tasks.starts)), tasks.sizes), tasks.starts)
            return spread_of(whole.count, whole.total, whole.mean, whole.m2), whole
        parts.append((count, total, mean, m2))
    count, total, mean, m2 = (np.concatenate([p[i] for p in parts]) if parts else np.zeros(0) for i in range(4))
    return spread_of(count, total, mean, m2), None


def whole_stats(values: np.ndarray, valid: np.ndarray) -> GroupedStats:
    """`grouped_stats` of every row as one group (the agent level), its sums carried slice by
    slice instead of over whole-column temporaries."""
    n = len(values)
    every = bool(valid.all())
    count = np.array([float(n if every else np.count_nonzero(valid))])
    total = _carried(values, valid, every, None, SLICE_ROWS)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean = total / count
        if not np.isfinite(mean[count > 0]).all():
            return _one_group(values, valid)
        m2 = _carried(values, valid, every, mean, SLICE_ROWS)
        std = np.sqrt(m2 / (count - 1))
        if not np.isfinite(std[count >= 2]).all():
            return _one_group(values, valid)
    std[count < 2] = np.nan
    starts = np.zeros(1, np.int64)
    if n:
        low = np.minimum.reduceat(values if every else np.where(valid, values, np.inf), starts)
        high = np.maximum.reduceat(values if every else np.where(valid, values, -np.inf), starts)
    else:
        low, high = np.zeros(1), np.zeros(1)
    low[count == 0] = np.nan
    high[count == 0] = np.nan
    qs = group_quantiles(values, valid, starts, count, (0.5,))
    return GroupedStats(count, mean, low, high, qs[0.5], std, qs, starts, total, m2)


def _one_group(values: np.ndarray, valid: np.ndarray) -> GroupedStats:
    return grouped_stats(values, valid, np.zeros(len(values), np.int64), np.zeros(1, np.int64))


def _carried(values: np.ndarray, valid: np.ndarray, every: bool, mean: np.ndarray | None, slice_rows: int) -> np.ndarray:
    """One group's sum of the valid values (mean None) or of their squared deviations from
    `mean`, in row order as one np.bincount over every row adds them."""
    acc: np.ndarray = np.zeros(1)
    for a in range(0, len(values), slice_rows):
        v = values[a : a + slice_rows]
        if mean is None:
            w = v if every else np.where(valid[a : a + slice_rows], v, 0.0)
        else:
            dev = v - mean[0]
            if not every:
                dev[~valid[a : a + slice_rows]] = 0.0
            w = dev * dev
        acc = np.bincount(np.zeros(len(w) + 1, np.intp), weights=np.concatenate((acc, w)), minlength=1)
    return acc


def repeat_level(
    cols: RolloutColumns, names: list[str], valid: dict[str, np.ndarray], total_tasks: int, repeats: np.ndarray
) -> list[dict[str, object]]:
    """`repeat_level_entries`, one repeat at a time: a repeat's rows in task order are its rows
    in key order, so no reordered copy of every column is made."""
    stats: dict[str, list[GroupedStats]] = {k: [] for k in names}
    sizes = np.zeros(len(repeats), np.int64)
    for j, repeat in enumerate(repeats.tolist()):
        pos = np.flatnonzero(cols.rollout_index == repeat)
        sizes[j] = len(pos)
        ids, first = np.zeros(len(pos), np.int64), np.zeros(1, np.int64)
        for k in names:
            s = grouped_stats(cols.fields[k].values[pos], valid[k][pos], ids, first, quantiles=(0.25, 0.75))
            if _overflowed(s):  # the engine rescales every repeat then: do as it does
                return repeat_level_entries(cols, names, valid, total_tasks)
            stats[k].append(s)
    per_field: PerField = {}
    for k in names:
        s = _stacked(stats[k])
        per_field[k] = (s, s.quantiles[0.25], s.quantiles[0.75])
    return repeat_entries(repeats, sizes, per_field, names, total_tasks)


def _overflowed(s: GroupedStats) -> bool:
    """Whether `grouped_stats` rescaled (its unscaled sums are not finite)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        mean_bad = not np.isfinite((s.total / s.count)[s.count > 0]).all()
        std_bad = not np.isfinite(np.sqrt(s.m2 / (s.count - 1))[s.count >= 2]).all()
    return mean_bad or std_bad


def _stacked(parts: list[GroupedStats]) -> GroupedStats:
    """One-group stats of each repeat as the stats of the repeats (one group each)."""
    cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
    qs = {q: np.concatenate([p.quantiles[q] for p in parts]) for q in parts[0].quantiles}
    return GroupedStats(cat("count"), cat("mean"), cat("min"), cat("max"), cat("median"), cat("std"), qs,
                        np.arange(len(parts)), cat("total"), cat("m2"))  # fmt: skip


__all__ = ["SLICE_ROWS", "Tasks", "repeat_level", "task_spread", "whole_stats"]
