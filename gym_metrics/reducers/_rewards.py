"""TaskRewards: many tasks' per-sample rewards as one flat array plus offsets.

Ragged on purpose: a padded tasks x samples matrix costs tasks x (longest task), so one task
with 10k samples would make 125k ordinary tasks cost 10 GB. Flat values plus offsets cost what
the samples cost, and every reducer is a handful of numpy passes over them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from functools import cached_property
from typing import Union, overload

import numpy as np

from gym_metrics.errors import FieldViolation, InvalidInputError

PASS_THRESHOLD = 1.0
"""A sample passes when its reward is at least this (docs/metrics.md#pass-threshold); the one
definition, used by the
reducers, compare, economics and the example environments."""


def passes(rewards: np.ndarray) -> np.ndarray:
    """Which rewards pass (at least PASS_THRESHOLD); NaN never does."""
    passed: np.ndarray = rewards >= PASS_THRESHOLD
    return passed


class TaskRewards(Sequence[np.ndarray]):
    """Per-task rewards in sample order, without gaps: a sample whose reward is NaN or +/-inf
    is left out of its task (as the aggregation engine leaves non-finite values out).

    Behaves as a sequence of tasks (each a 1-D float64 array), so a metric written for
    `Sequence[Sequence[float]]` accepts it unchanged.
    """

    def __init__(self, values: np.ndarray, offsets: np.ndarray) -> None:
        self.values = np.ascontiguousarray(values, dtype=np.float64)
        """Every task's finite rewards, task after task, in sample order."""
        self.offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        """Task i is values[offsets[i]:offsets[i + 1]]; len(offsets) = tasks + 1."""
        if self.values.ndim != 1 or self.offsets.ndim != 1 or len(self.offsets) == 0:
            raise ValueError("TaskRewards needs 1-D values and non-empty 1-D offsets")
        if self.offsets[0] != 0 or self.offsets[-1] != len(self.values) or (np.diff(self.offsets) < 0).any():
            raise ValueError("offsets must rise from 0 to len(values)")

    # ----- construction -----

    @classmethod
    def of(cls, task_rewards: TaskRewardsLike) -> TaskRewards:
        """Coerce lists of lists, a 2-D array (one row per task; NaN = no sample) or a
        TaskRewards (returned as is)."""
        if isinstance(task_rewards, TaskRewards):
            return task_rewards
        if isinstance(task_rewards, np.ndarray):
            if task_rewards.ndim != 2:
                raise InvalidInputError(f"a reward array needs 2 dimensions (tasks x samples), got {task_rewards.ndim}")
            rows, width = task_rewards.shape
            values = task_rewards.astype(np.float64, copy=False).ravel()
            return cls._finite(values, np.arange(rows + 1, dtype=np.int64) * width)
        tasks = list(task_rewards)
        lengths = np.fromiter(map(len, tasks), dtype=np.int64, count=len(tasks))
        try:
            values = np.fromiter(  # text is refused (numpy would parse "1.0" into a pass)
                (_NOT_A_NUMBER if isinstance(v, (str, bytes)) else v for v in itertools.chain.from_iterable(tasks)),
                dtype=np.float64, count=int(lengths.sum()),
            )
        except (TypeError, ValueError):
            raise InvalidInputError("rewards must be numbers", [_first_bad(tasks)]) from None
        return cls._finite(values, np.concatenate(([0], np.cumsum(lengths))))

    @classmethod
    def from_columns(cls, task_index: np.ndarray, values: np.ndarray, valid: np.ndarray) -> TaskRewards:
        """From rollout columns sorted by (task, rollout): every task present in `task_index`
        is a task, even when none of its rows has a valid reward (it is then empty)."""
        n = len(task_index)
        if n == 0:
            return cls(np.zeros(0), np.zeros(1, np.int64))
        starts = np.flatnonzero(np.concatenate(([True], task_index[1:] != task_index[:-1])))
        bounds = np.append(starts, n)
        keep = np.asarray(valid, dtype=bool) & np.isfinite(values)
        kept = np.concatenate(([0], np.cumsum(keep)))[bounds]
        return cls(values[keep], kept)

    @classmethod
    def _finite(cls, values: np.ndarray, offsets: np.ndarray) -> TaskRewards:
        ok = np.isfinite(values)
        if ok.all():
            return cls(values, offsets)
        return cls(values[ok], np.concatenate(([0], np.cumsum(ok)))[offsets])

    # ----- sequence protocol -----

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, i: int) -> np.ndarray: ...
    @overload
    def __getitem__(self, i: slice) -> list[np.ndarray]: ...
    def __getitem__(self, i: int | slice) -> np.ndarray | list[np.ndarray]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"TaskRewards({len(self)} tasks, {len(self.values)} samples)"

    def take(self, tasks: np.ndarray) -> TaskRewards:
        """These tasks (repeats allowed), in this order: what a bootstrap resample needs."""
        tasks = np.asarray(tasks, dtype=np.int64)
        lengths = self.lengths[tasks]
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        source = np.repeat(self.offsets[:-1][tasks] - offsets[:-1], lengths) + np.arange(offsets[-1])
        return TaskRewards(self.values[source], offsets)

    # ----- derived columns (computed once, shared by every reducer) -----

    @cached_property
    def lengths(self) -> np.ndarray:
        """Samples per task."""
        return np.diff(self.offsets)

    @cached_property
    def task_ids(self) -> np.ndarray:
        """The task of each sample."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths)

    @cached_property
    def positions(self) -> np.ndarray:
        """Each sample's position in its task (0 = first)."""
        return np.arange(len(self.values), dtype=np.int64) - np.repeat(self.offsets[:-1], self.lengths)

    @cached_property
    def passed(self) -> np.ndarray:
        """Samples at or above PASS_THRESHOLD."""
        return passes(self.values)

    @cached_property
    def pass_counts(self) -> np.ndarray:
        """Passing samples per task."""
        return self.count_per_task(self.passed)

    @cached_property
    def width(self) -> int | None:
        """The common number of samples when every task has the same (the usual tasks x
        repeats), else None: such rewards are a matrix, and counting by rows is faster."""
        n = self.lengths
        return int(n[0]) if len(n) and n[0] > 0 and (n == n[0]).all() else None

    def count_per_task(self, mask: np.ndarray, first: int | None = None) -> np.ndarray:
        """How many samples of each task `mask` selects, among its `first` ones when given
        (exact integer counts)."""
        if self.width is not None:
            rows = mask.reshape(len(self), self.width)
            counts: np.ndarray = np.count_nonzero(rows if first is None else rows[:, :first], axis=1)
            return counts
        if first is not None:
            mask = mask & (self.positions < first)
        return np.diff(np.concatenate(([0], np.cumsum(mask, dtype=np.int64)))[self.offsets])

    def sum_per_task(self, x: np.ndarray) -> np.ndarray:
        """Per-task sums of a per-sample float column."""
        return np.bincount(self.task_ids, weights=x, minlength=len(self))


TaskRewardsLike = Union[TaskRewards, np.ndarray, Sequence[Sequence[float]]]
"""What every metric accepts: one inner sequence per task, that task's rewards in order."""


_NOT_A_NUMBER = object()
"""What a text reward becomes on its way into the array: numpy refuses it."""


def _first_bad(tasks: list[Sequence[float]]) -> FieldViolation:
    for t, task in enumerate(tasks):
        for s, value in enumerate(task):
            try:
                if isinstance(value, (str, bytes)):
                    raise TypeError
                float(value)
            except (TypeError, ValueError):
                return FieldViolation(f"task_rewards[{t}][{s}]", f"not a number: {value!r}")
    return FieldViolation("task_rewards", "not numbers")
