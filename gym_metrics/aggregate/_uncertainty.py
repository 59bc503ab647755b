"""Honest uncertainty of each agent-level mean, beside NeMo Gym's keys (never changing them):
the clustered standard error by task and its Student-t interval, the split of the variance
into between-task and within-task parts, and for 0/1 fields the Wilson interval
(docs/statistics.md). Everything comes from the per-task sums the group level computed: O(tasks),
reduced to a few numbers per field while the group level still holds them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gym_metrics.aggregate._stats import GroupedStats
from gym_metrics.statistics import components_from_groups, linearized_stderr, t_interval, wilson_interval

ADDED_AGENT_METRICS = (
    "cluster_stderr",
    "cluster_ci_low_95",
    "cluster_ci_high_95",
    "var_between",
    "var_within",
    "wilson_ci_low_95",
    "wilson_ci_high_95",
)
"""Prefixes (`<prefix>/<field>`) of the agent_metrics keys gym-metrics adds to NeMo Gym's."""


@dataclass(frozen=True)
class FieldSpread:
    """What the uncertainty keys of one field need from its per-task stats."""

    stderr: float
    tasks: int
    between: float
    within: float
    total: float
    count: int


def field_spread(s: GroupedStats) -> FieldSpread:
    """The clustered standard error and variance components of one field (tasks with no valid
    value left out)."""
    return spread_of(s.count, s.total, s.mean, s.m2)


def spread_of(count: np.ndarray, total: np.ndarray, mean: np.ndarray, m2: np.ndarray) -> FieldSpread:
    """`field_spread` from the per-task sums alone (the merge computes them a range of tasks
    at a time, without the other stats)."""
    has = count > 0
    sums, counts = total[has], count[has]
    with np.errstate(all="ignore"):  # values near the float64 limit: non-finite, left out later
        se = linearized_stderr(sums, counts)
        parts = components_from_groups(mean[has], counts, float(m2[has].sum()))
    return FieldSpread(se, len(sums), parts.between, parts.within, float(sums.sum()), int(counts.sum()))


def uncertainty_metrics(
    spreads: Mapping[str, FieldSpread], means: Mapping[str, float], binary: Mapping[str, bool]
) -> dict[str, float]:
    """`<prefix>/<field>` for each field with a finite agent mean (`means`: mean/<field>); a
    value that is undefined (one task, no task with two rollouts) is left out, as NeMo Gym
    leaves out non-finite stats."""
    out: dict[str, float] = {}
    for name, s in spreads.items():
        mean = means.get(name)
        if mean is None:
            continue
        low, high = t_interval(mean, s.stderr, s.tasks - 1)
        found = {"cluster_stderr": s.stderr, "cluster_ci_low_95": low, "cluster_ci_high_95": high,
                 "var_between": s.between, "var_within": s.within}  # fmt: skip
        if binary.get(name):
            found["wilson_ci_low_95"], found["wilson_ci_high_95"] = wilson_interval(int(round(s.total)), s.count)
        out.update({f"{prefix}/{name}": float(v) for prefix, v in found.items() if math.isfinite(v)})
    return dict(sorted(out.items(), key=lambda kv: ADDED_AGENT_METRICS.index(kv[0].split("/", 1)[0])))


def is_binary(values: np.ndarray, valid: np.ndarray) -> bool:
    """Every valid value is 0 or 1 (a pass/fail field such as a 0/1 reward or is_correct)."""
    v = values[valid] if not valid.all() else values
    return len(v) > 0 and bool(((v == 0.0) | (v == 1.0)).all())


__all__ = ["ADDED_AGENT_METRICS", "FieldSpread", "field_spread", "is_binary", "spread_of", "uncertainty_metrics"]
