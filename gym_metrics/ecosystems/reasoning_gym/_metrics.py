"""Metrics per reasoning-gym dataset, from columns: each rollout's reward is also written under
`reward/<dataset>` (absent for the other datasets), so the aggregation groups by dataset without
a row dict: the engine's per-field statistics give `mean/reward/<dataset>` (and std, min, max,
median), and the environment's reducers over each such column give `<dataset>/<reducer>`, keyed
as NeMo Gym's `compute_subset_metrics` keys a subset's.

A mix's agent then reads, beside its overall pass@1, the pass@1 of each dataset in it. Only the
tasks of a dataset count for it (a task's rollouts all have the same entry, so one dataset)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from gym_metrics.aggregate import MetricColumns

FIELD_PREFIX = "reward/"


def dataset_field(dataset: str) -> str:
    """The verify-response field holding a rollout's reward under its dataset's name."""
    return FIELD_PREFIX + dataset


def per_dataset_metrics(columns: MetricColumns, reducers: Iterable[str]) -> dict[str, float | int]:
    """`<dataset>/<key>` for every key the reducers give over that dataset's tasks (value,
    stderr, interval, tasks used); datasets in name order."""
    from gym_metrics.reducers import TaskRewards, summarize_reducers  # (not at load: `gym-metrics dataset` needs none)

    names = list(reducers)
    out: dict[str, float | int] = {}
    for field in sorted(f for f in columns.values if f.startswith(FIELD_PREFIX)):
        column = columns.values[field]
        mine = ~np.isnan(column)
        if not mine.any():
            continue
        rewards = TaskRewards.from_columns(columns.rollout_task_index[mine], column[mine], np.ones(int(mine.sum()), bool))
        name = field[len(FIELD_PREFIX) :]
        out.update((f"{name}/{key}", value) for key, value in summarize_reducers(names, rewards).items())
    return out


__all__ = ["FIELD_PREFIX", "dataset_field", "per_dataset_metrics"]
