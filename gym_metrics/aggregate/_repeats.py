"""Repeat-level statistics: each rollout index across tasks, and each repeat's mean
across repeats, as NeMo Gym reports them (docs/metrics.md#repeat-level)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gym_metrics.rollouts import ROLLOUT_KEY, TASK_KEY, RolloutColumns
from gym_metrics.aggregate._stats import GroupedStats, group_starts, grouped_stats, t_interval


def repeat_level_entries(
    m: RolloutColumns, names: list[str], valid: dict[str, np.ndarray], total_tasks: int
) -> list[dict[str, Any]]:
    """docs/metrics.md#repeat-level: stats of each rollout index across tasks."""
    order = _by_repeat(m.task_index, m.rollout_index, total_tasks)
    r = m.rollout_index[order]
    starts = group_starts(r)
    sizes = np.diff(np.append(starts, len(r)))
    gid = np.repeat(np.arange(len(starts)), sizes)
    per_field: PerField = {}
    for k in names:
        s = grouped_stats(m.fields[k].values[order], valid[k][order], gid, starts, quantiles=(0.25, 0.75))
        per_field[k] = (s, s.quantiles[0.25], s.quantiles[0.75])
    return repeat_entries(r[starts], sizes, per_field, names, total_tasks)


PerField = dict[str, tuple[GroupedStats, np.ndarray, np.ndarray]]
"""Per field: its stats per repeat, and each repeat's 25th and 75th percentiles."""


def repeat_entries(
    repeats: np.ndarray, sizes: np.ndarray, per_field: PerField, names: list[str], total_tasks: int
) -> list[dict[str, Any]]:
    """The entries from each repeat's stats (repeats: the rollout indices, ascending; sizes:
    each one's rows)."""
    out = []
    for g, repeat in enumerate(repeats.tolist()):
        entry: dict[str, Any] = {
            ROLLOUT_KEY: int(repeat),
            "sample_count": int(sizes[g]),
            "missing_count": int(total_tasks - sizes[g]),
        }
        for k in names:
            s, p25, p75 = per_field[k]
            n = int(s.count[g])
            if n == 0:
                continue
            mean = float(s.mean[g])
            std = float(s.std[g]) if n > 1 else 0.0
            sem = std / n**0.5
            entry[f"mean/{k}"] = mean
            entry[f"median/{k}"] = float(s.median[g])
            entry[f"std/{k}"] = std
            entry[f"sem/{k}"] = sem
            entry[f"min/{k}"] = float(s.min[g])
            entry[f"max/{k}"] = float(s.max[g])
            entry[f"p25/{k}"] = float(p25[g])
            entry[f"p75/{k}"] = float(p75[g])
            ci = t_interval(mean, sem, n)
            if ci:
                entry[f"ci_low_95/{k}"], entry[f"ci_high_95/{k}"] = ci
        out.append(entry)
    return out


def _by_repeat(tasks: np.ndarray, repeats: np.ndarray, n_tasks: int) -> np.ndarray:
    """The order sorting rows (sorted by task, then repeat) by (repeat, task). When every task
    has the same repeats (tasks x K, the usual shape) that is a transpose, no sort."""
    n = len(tasks)
    width = n // n_tasks if n_tasks else 0
    if width and width * n_tasks == n:
        grid = repeats.reshape(n_tasks, width)
        if (grid == grid[0]).all():
            return np.arange(n).reshape(n_tasks, width).T.ravel()
    return np.lexsort((tasks, repeats))


def across_repeats(repeat_level: list[dict[str, Any]], names: list[str]) -> dict[str, float]:
    """docs/metrics.md#repeat-level: each repeat's `mean/<f>` treated as one observation."""
    return _across(repeat_level, [f"mean/{k}" for k in names])


_NOT_REPEAT_METRICS = frozenset({TASK_KEY, ROLLOUT_KEY, "_ng_attempt_index", "sample_count", "missing_count", "num_repeats", "token_usage_version"})
_STAT_PREFIXES = ("max/", "min/", "median/", "std/", "sem/", "se/", "p25/", "p75/", "ci_low_95/", "ci_high_95/", "histogram/")


def add_repeat_metrics(
    agent_metrics: dict[str, Any], repeat_level: list[dict[str, Any]], custom: dict[str, Any], per_repeat: list[dict[str, Any]]
) -> None:
    """An environment's compute_repeat_metrics answers (one per repeat_level entry), as NeMo Gym
    folds them in: each name it returns replaces that name in every repeat's entry, kept only
    where every repeat's value (and the whole run's, when compute_metrics gave one) is a finite
    number; the across-repeats summaries of those names are dropped, then every summary is made
    again from the entries."""
    names = {name for metrics in per_repeat for name in metrics}
    if not names:
        return
    for name in names:
        values = [metrics.get(name) for metrics in per_repeat]
        for entry in repeat_level:
            entry.pop(name, None)
        if (name not in custom or _finite(custom[name])) and all(_finite(v) for v in values):
            for entry, value in zip(repeat_level, values):
                entry[name] = float(value)  # type: ignore[arg-type]  # finite numbers: checked above
    for key in list(agent_metrics):
        if "_across_repeats/" in key and key.split("_across_repeats/", 1)[1] in names:
            del agent_metrics[key]
    columns = list(dict.fromkeys(k for e in repeat_level for k, v in e.items() if _finite(v)))
    agent_metrics.update(_across(repeat_level, [k for k in columns if k not in _NOT_REPEAT_METRICS and not k.startswith(_STAT_PREFIXES)]))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _across(repeat_level: list[dict[str, Any]], keys: list[str]) -> dict[str, float]:
    """Each primary key of the entries, its values across repeats as observations."""
    out: dict[str, float] = {}
    for key in keys:
        if not _is_primary_metric(key):
            continue
        x = np.array([e[key] for e in repeat_level if key in e], dtype=np.float64)
        n = len(x)
        if n == 0:
            continue
        s = grouped_stats(x, np.ones(n, bool), np.zeros(n, np.int64), np.zeros(1, np.int64))
        mean = float(s.mean[0])
        std = float(s.std[0]) if n > 1 else 0.0
        se = std / n**0.5
        out[f"mean_across_repeats/{key}"] = mean
        out[f"median_across_repeats/{key}"] = float(s.median[0])
        out[f"std_across_repeats/{key}"] = std
        out[f"min_across_repeats/{key}"] = float(s.min[0])
        out[f"max_across_repeats/{key}"] = float(s.max[0])
        out[f"se_across_repeats/{key}"] = se
        ci = t_interval(mean, se, n)
        if ci:
            out[f"ci_low_95_across_repeats/{key}"], out[f"ci_high_95_across_repeats/{key}"] = ci
    return out


# NeMo Gym aggregates across repeats only "primary" metrics: a name that reads like a summary
# statistic or an uncertainty estimate is skipped (so `mean/judge/max` or `mean/acc_ci_lower`
# get no `*across_repeats/` block). Every name here starts with "mean/", so only the suffix and
# marker rules can apply.
_NOT_PRIMARY_SUFFIXES = (
    "/max",
    "/min",
    "/median",
    "/p5",
    "/p25",
    "/p75",
    "/p95",
    "/ci_low_95",
    "/ci_high_95",
    "/ci_lower",
    "/ci_upper",
    "_ci_lower",
    "_ci_upper",
    "_ci95_lower",
    "_ci95_upper",
    "/_ng_attempt_index",
    "/std_dev_across_runs",
    "/std_err_across_runs",
    "/avg_sample_std_dev",
)


def _is_primary_metric(name: str) -> bool:
    return not name.endswith(_NOT_PRIMARY_SUFFIXES) and "across_repeats/" not in name
