"""What a reward reducer is: a named reduction of per-task rewards to one number
(lm-eval-harness style, with `higher_is_better`), plus its uncertainty."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from gym_metrics.reducers._rewards import TaskRewards, TaskRewardsLike
from gym_metrics.reducers._uncertainty import (
    CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    bootstrap_mean,
    t_mean,
    wilson,
)

GENERIC_RESAMPLES = 200
"""Resamples of the generic bootstrap, which recomputes the reducer once per resample."""


@dataclass(frozen=True)
class ReducerResult:
    """A reducer's value with its uncertainty and the tasks behind it."""

    name: str
    value: float
    stderr: float | None
    """Standard error of `value`; None when undefined (fewer than 2 tasks or samples)."""
    ci_low: float | None
    """Lower end of the 95% interval; None when undefined."""
    ci_high: float | None
    tasks_used: int
    """Tasks the value is computed from."""
    tasks_dropped: int
    """Tasks left out (empty ones; for the unbiased estimators, those with fewer than k samples)."""
    method: str
    """How the interval was made: "t" (Student t over tasks), "wilson" or "bootstrap"."""

    def as_metrics(self, key: str | None = None) -> dict[str, float | int]:
        """`{key: value, key/stderr, key/ci_low_95, key/ci_high_95, key/tasks_used,
        key/tasks_dropped}`; undefined entries are left out, never null."""
        key = key or self.name
        out: dict[str, float | int] = {key: self.value}
        for suffix, value in (("stderr", self.stderr), ("ci_low_95", self.ci_low), ("ci_high_95", self.ci_high)):
            if value is not None:
                out[f"{key}/{suffix}"] = value
        out[f"{key}/tasks_used"] = self.tasks_used
        out[f"{key}/tasks_dropped"] = self.tasks_dropped
        return out


class Reducer:
    """A reward reducer: `compute(task_rewards)` -> one float, no configuration.

    `task_rewards` holds one inner sequence per task, that task's sample rewards in rollout
    order (a TaskRewards, a list of lists or a 2-D array). Subclasses define `compute`;
    `summarize` adds uncertainty, by default through a bootstrap that recomputes the reducer on
    resampled tasks (override it, or subclass MeanOverTasks, for a closed form). A reducer that is
    a ratio of per-task sums also defines `task_terms`, which lets a bootstrap (compare's paired
    one) resample tasks in numpy instead of calling `compute` once per resample.
    """

    name: ClassVar[str] = ""
    """Registry name; set by @register_reducer."""
    higher_is_better: ClassVar[bool] = True

    def compute(self, task_rewards: TaskRewardsLike) -> float:
        raise NotImplementedError(f"{type(self).__name__} must implement compute()")

    def task_terms(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray] | None:
        """The vectorised per-task form, when the value has one: (numerator, weight) per task,
        float64, such that the value over any multiset of these tasks (a bootstrap resample) is
        sum(numerator) / sum(weight), 0.0 when the weights sum to 0. None (the default): the
        value must be recomputed with `compute` on each resample."""
        return None

    def summarize(
        self, task_rewards: TaskRewardsLike, *, seed: int = DEFAULT_SEED, resamples: int | None = None
    ) -> ReducerResult:
        """Value, standard error, 95% interval, tasks used and dropped."""
        rewards = TaskRewards.of(task_rewards)
        value = float(self.compute(rewards))
        n = len(rewards)
        interval = Interval(None, None, None, "bootstrap")
        if n >= 2:
            rng = np.random.default_rng(seed)
            draws = range(resamples or GENERIC_RESAMPLES)
            stats = np.array([float(self.compute(rewards.take(rng.integers(0, n, n)))) for _ in draws])
            alpha = (1 - CONFIDENCE) / 2
            low, high = np.quantile(stats, [alpha, 1 - alpha])
            interval = Interval(float(stats.std(ddof=1)), float(low), float(high), "bootstrap")
        return _result(self.name, value, interval, n, 0)

    def __repr__(self) -> str:
        return f"<reducer {self.name!r}>"


class MeanOverTasks(Reducer):
    """A reducer that is the mean over tasks of one score per task (macro average): define
    `task_scores`; the value, stderr and interval over tasks follow."""

    interval: ClassVar[Literal["t", "wilson", "bootstrap"]] = "t"
    """"t" for scores in general, "wilson" for 0/1 scores, "bootstrap" where neither fits."""

    def task_scores(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        """(one score per task, which tasks count)."""
        raise NotImplementedError(f"{type(self).__name__} must implement task_scores()")

    def compute(self, task_rewards: TaskRewardsLike) -> float:
        scores, used = self.task_scores(TaskRewards.of(task_rewards))
        return _mean(scores[used])

    def task_terms(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        """(the task's score where it counts, else 0; 1 where it counts, else 0)."""
        scores, used = self.task_scores(rewards)
        return np.where(used, scores, 0.0), used.astype(np.float64)

    def summarize(
        self, task_rewards: TaskRewardsLike, *, seed: int = DEFAULT_SEED, resamples: int | None = None
    ) -> ReducerResult:
        rewards = TaskRewards.of(task_rewards)
        scores, used = self.task_scores(rewards)
        x = scores[used]
        if self.interval == "wilson":
            interval = wilson(int(np.count_nonzero(x)), len(x))
        elif self.interval == "bootstrap":
            interval = bootstrap_mean(x, seed, resamples or DEFAULT_RESAMPLES)
        else:
            interval = t_mean(x)
        return _result(self.name, _mean(x), interval, len(x), len(rewards) - len(x))


def _mean(x: np.ndarray) -> float:
    """Mean, 0.0 when there is nothing to average (docs/metrics.md#reward-reducers)."""
    return float(x.mean()) if len(x) else 0.0


def _result(name: str, value: float, interval: Interval, used: int, dropped: int) -> ReducerResult:
    return ReducerResult(name, value, interval.stderr, interval.ci_low, interval.ci_high, used, dropped, interval.method)

