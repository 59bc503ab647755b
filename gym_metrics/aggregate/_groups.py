"""Per-task columns of the result: the stat columns in output order, each task's sample, and
the per-task entries an environment's compute_metrics returns."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from gym_metrics.rollouts import TASK_KEY, RolloutColumns
from gym_metrics.aggregate._rows import sample_texts
from gym_metrics.aggregate._tables import GroupTable
from gym_metrics.errors import UserCodeError

log = logging.getLogger("gym_metrics.aggregate")

GROUP_STATS = ("mean", "max", "min", "median", "std")


def stat_columns(stats: dict[str, Any], names: list[str], sizes: np.ndarray) -> dict[str, np.ndarray]:
    """Columns "<stat>/<field>" in output order, with the rule for undefined stds
    (docs/metrics.md#missing-values)."""
    if not names:
        return {}
    stds = np.vstack([stats[k].std for k in names])
    all_std_undefined = np.isnan(stds).all(axis=0)
    cols: dict[str, np.ndarray] = {}
    for stat in GROUP_STATS:
        for k in names:
            col = getattr(stats[k], stat)
            if stat == "std":
                col = col.copy()
                fill = all_std_undefined & (stats[k].count == sizes)
                col[fill] = 0.0
            cols[f"{stat}/{k}"] = np.where(np.isfinite(col), col, np.nan)  # NaN = absent
    return cols


def fill_samples(
    groups: GroupTable, data: RolloutColumns, first_pos: np.ndarray, tasks: np.ndarray, names: list[str]
) -> None:
    """`sample` = the task's first measured rollout row, without its indices (made when read)."""
    rows = np.full(len(groups), -1, dtype=np.int64)
    rows[np.searchsorted(groups.task_index, tasks)] = first_pos
    groups.defer_samples(rows, lambda pos: sample_texts(data, pos.tolist(), names))


_SLICE = 65_536
"""Tasks turned into Python ints at a time: one `tolist()` of millions holds the GIL (and the
server's event loop) for 100 ms and more."""


def merge_per_task(groups: GroupTable, per_task: list[dict[str, Any]]) -> None:
    """compute_metrics' per_task_metrics entries onto the groups of their `_ng_task_index`.
    An entry naming no task the agent has is dropped, as NeMo Gym drops it, and logged (the
    usual cause: the position in `tasks` taken for the task index); an entry without one is
    an error, where NeMo Gym raises KeyError."""
    position: dict[Any, int] = {}
    for lo in range(0, len(groups), _SLICE):
        position.update(zip(groups.task_index[lo : lo + _SLICE].tolist(), range(lo, lo + _SLICE)))
    if not isinstance(per_task, list):
        raise UserCodeError("compute_metrics", TypeError(f"its per_task_metrics is a {type(per_task).__name__}: a list of "
                                                         f"dicts, each with its {TASK_KEY}"))  # fmt: skip
    custom: list[dict[str, Any] | None] = [None] * len(groups)
    unknown = []
    for n, entry in enumerate(per_task):
        if not isinstance(entry, Mapping) or TASK_KEY not in entry:
            raise UserCodeError("compute_metrics", TypeError(f"per_task_metrics[{n}] has no {TASK_KEY}: each entry names the task it is about"))
        i = position.get(entry[TASK_KEY])
        if i is None:
            unknown.append(entry[TASK_KEY])
        else:
            custom[i] = {k: v for k, v in entry.items() if k != TASK_KEY}
    if unknown:
        typed = next((u for u in unknown if not isinstance(u, int) or isinstance(u, bool)), None)
        why = "" if typed is None else f" ({typed!r} is a {type(typed).__name__}: task indices are integers)"
        log.warning("compute_metrics' per_task_metrics names %d tasks the agent has none of (dropped, as NeMo Gym drops them): %s%s",
                    len(unknown), ", ".join(map(repr, unknown[:10])), why)  # fmt: skip
    groups.custom = custom


__all__ = ["GROUP_STATS", "fill_samples", "merge_per_task", "stat_columns"]
