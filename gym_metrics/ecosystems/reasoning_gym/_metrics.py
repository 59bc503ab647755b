"""Metrics per reasoning-gym dataset: the environment's reducers over each dataset's tasks,
keyed `<dataset>/<reducer>` as NeMo Gym's `compute_subset_metrics` keys a subset's.

A task belongs to the dataset its rows name (`dataset`, what verify returns); a mix's agent
then reads, beside its overall pass@1, the pass@1 of each dataset in it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from gym_metrics.reducers import summarize_reducers

GROUP_FIELD = "dataset"


def per_dataset_metrics(tasks: Sequence[Sequence[dict[str, Any]]], reducers: Iterable[str]) -> dict[str, float | int]:
    """`<dataset>/<key>` for every key the reducers give over that dataset's tasks (value,
    stderr, interval, tasks used); datasets in name order. Rows without a dataset name (not
    verified by this environment) are left out."""
    names = list(reducers)
    groups: dict[str, list[list[float]]] = {}
    for rows in tasks:
        name = next((r[GROUP_FIELD] for r in rows if isinstance(r.get(GROUP_FIELD), str)), None)
        if name is None:
            continue
        groups.setdefault(name, []).append([_reward(r) for r in rows])
    out: dict[str, float | int] = {}
    for name in sorted(groups):
        out.update((f"{name}/{key}", value) for key, value in summarize_reducers(names, groups[name]).items())
    return out


def _reward(row: dict[str, Any]) -> float:
    value = row.get("reward")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


__all__ = ["GROUP_FIELD", "per_dataset_metrics"]
