"""MetricColumns: what a columnar `compute_metrics_columns` hook receives (issue 12).

The measured rollouts of one agent (not masked, not failed; sorted by task, then rollout) as
numpy arrays instead of row dicts. Shapes, with T tasks and N measured rollouts:

- `task_index` (T,) int64, ascending: the tasks with at least one measured rollout.
- `counts` (T,) int64 >= 1: measured rollouts per task.
- `offsets` (T + 1,) int64: task i's rollouts are positions offsets[i]:offsets[i + 1] of the
  per-rollout arrays.
- `rollout_task_index` (N,) int64 and `rollout_index` (N,) int64: each rollout's indices.
- `values` {name: (N,) float64}: every numeric field some measured rollout has (`reward`
  included; bools as 0/1), NaN where the rollout does not have it (absent or non-numeric);
  non-finite values (NaN, +/-inf) are kept as they are.
- `rewards` (T, R) float64, R = max(counts): rewards[i, j] is the reward of task i's j-th
  measured rollout in rollout order, NaN where it has none and for j >= counts[i]. Built on
  first use (a task with many more rollouts than the others makes it T x that many).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from gym_metrics.rollouts import ROLLOUT_KEY_ALIASES, TASK_KEY_ALIASES

REWARD = "reward"


@dataclass(frozen=True)
class MetricColumns:
    """One agent's measured rollouts as columns (the module docstring gives every shape)."""

    task_index: np.ndarray
    counts: np.ndarray
    rollout_task_index: np.ndarray
    rollout_index: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)

    @cached_property
    def offsets(self) -> np.ndarray:
        """(T + 1,): task i's rollouts are offsets[i]:offsets[i + 1]."""
        return np.concatenate(([0], np.cumsum(self.counts, dtype=np.int64)))

    @cached_property
    def reward(self) -> np.ndarray:
        """(N,): each rollout's reward, NaN where it has none."""
        return self.values.get(REWARD, np.full(len(self.rollout_index), np.nan))

    @cached_property
    def rewards(self) -> np.ndarray:
        """(T, R) task x rollout reward matrix, NaN-padded (module docstring)."""
        width = int(self.counts.max()) if len(self.counts) else 0
        matrix = np.full((len(self.task_index), width), np.nan)
        positions = np.arange(len(self.rollout_index), dtype=np.int64) - np.repeat(self.offsets[:-1], self.counts)
        matrix[np.repeat(np.arange(len(self.task_index)), self.counts), positions] = self.reward
        return matrix

    def __len__(self) -> int:
        """Measured rollouts (N)."""
        return len(self.rollout_index)

    @classmethod
    def from_task_rows(cls, tasks: list[list[dict[str, object]]]) -> MetricColumns:
        """From `compute_metrics`' rows grouped by task (an environment's row-dict hook can
        delegate to its columnar one): numeric fields only (bools as 0/1), others left out. A
        task without rows stays (count 0); a row without indices takes its position."""
        counts = np.array([len(t) for t in tasks], dtype=np.int64)
        rows = [row for t in tasks for row in t]

        def index(row: dict[str, object], aliases: tuple[str, ...], default: int) -> int:
            for key in aliases:
                value = row.get(key)
                if value is not None:
                    return int(value)  # type: ignore[call-overload]
            return default

        task_index = np.array([index(t[0] if t else {}, TASK_KEY_ALIASES, i) for i, t in enumerate(tasks)], dtype=np.int64)
        rollout_index = np.array(
            [index(row, ROLLOUT_KEY_ALIASES, j) for t in tasks for j, row in enumerate(t)], dtype=np.int64
        )
        names = {k for row in rows for k, v in row.items() if isinstance(v, (bool, int, float))}
        names -= {*TASK_KEY_ALIASES, *ROLLOUT_KEY_ALIASES}
        values = {}
        for name in sorted(names):
            col = [row.get(name) for row in rows]
            values[name] = np.array(
                [float(v) if isinstance(v, (bool, int, float)) else np.nan for v in col], dtype=np.float64
            )
        return cls(task_index, counts, np.repeat(task_index, counts), rollout_index, values)


__all__ = ["MetricColumns"]
