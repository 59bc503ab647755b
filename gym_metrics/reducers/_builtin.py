"""The built-in reward reducers (docs/metrics.md#reward-reducers), vectorised over all tasks.

Two kinds of pass@k / pass^k, named apart on purpose:
- `pass@{k}` / `pass^{k}` look at the FIRST k samples of each task (rollout order matters), as
  many RL pipelines report them; a task shorter than k uses what it has. (NeMo Gym's
  `compute_pass_majority_metrics` pass@k is the unbiased one, for 0/1 rewards.)
- `unbiased_pass@{k}` / `unbiased_pass^{k}` are the estimators over all n samples of a task
  (Chen et al. 2021; tau-bench), order-free and lower-variance; a task with fewer than k
  samples has no estimate and is dropped (and counted), never scored 1.0.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from gym_metrics.reducers._base import MeanOverTasks, Reducer, ReducerResult, _result
from gym_metrics.reducers._registry import register_reducer
from gym_metrics.reducers._rewards import TaskRewards, TaskRewardsLike
from gym_metrics.reducers._uncertainty import DEFAULT_SEED, wilson


@register_reducer("mean_reward")
class MeanReward(MeanOverTasks):
    """Macro mean: each non-empty task's mean reward, averaged over tasks (so a task with
    many samples weighs no more than one with few). Interval: Student t over tasks."""

    interval = "t"

    def task_scores(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        n = rewards.lengths
        used = n > 0
        sums = rewards.sum_per_task(rewards.values)
        return np.divide(sums, n, out=np.zeros(len(rewards)), where=used), used


@register_reducer("avg")
class Avg(MeanReward):
    """Alias of mean_reward."""


@register_reducer("pass_rate")
class PassRate(Reducer):
    """Micro rate: passing samples / all samples. Interval: Wilson over samples (which treats
    samples as independent; samples of one task usually are not, so prefer a per-task metric
    for comparisons)."""

    def compute(self, task_rewards: TaskRewardsLike) -> float:
        rewards = TaskRewards.of(task_rewards)
        total = len(rewards.values)
        return int(np.count_nonzero(rewards.passed)) / total if total else 0.0

    def task_terms(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        """(passing samples, samples) per task."""
        return rewards.pass_counts.astype(np.float64), rewards.lengths.astype(np.float64)

    def summarize(
        self, task_rewards: TaskRewardsLike, *, seed: int = DEFAULT_SEED, resamples: int | None = None
    ) -> ReducerResult:
        rewards = TaskRewards.of(task_rewards)
        total = len(rewards.values)
        passes = int(np.count_nonzero(rewards.passed))
        used = int(np.count_nonzero(rewards.lengths))
        value = passes / total if total else 0.0
        return _result(self.name, value, wilson(passes, total), used, len(rewards) - used)


class _FirstK(MeanOverTasks):
    """Scores each task 0/1 from its first k samples; every task counts (an empty one fails).
    Interval: Wilson over tasks."""

    k: ClassVar[int]
    interval = "wilson"

    def _first_k(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        """(passes among the first k samples, how many samples that is) per task."""
        return rewards.count_per_task(rewards.passed, first=self.k), np.minimum(rewards.lengths, self.k)


@register_reducer("pass@{k}")
class PassAtK(_FirstK):
    """Fraction of tasks where ANY of the first k samples passes."""

    def task_scores(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        passes, _ = self._first_k(rewards)
        return (passes > 0).astype(np.float64), np.ones(len(rewards), bool)


@register_reducer("pass^{k}")
class PassHatK(_FirstK):
    """Fraction of tasks where ALL of the first k samples pass; an empty task fails (never
    `all([])`)."""

    def task_scores(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        passes, seen = self._first_k(rewards)
        return ((passes == seen) & (seen > 0)).astype(np.float64), np.ones(len(rewards), bool)


class _Unbiased(MeanOverTasks):
    """Uses tasks with at least k samples. Interval: seeded bootstrap over tasks (the
    per-task estimates are bounded and often piled at 0 and 1, where a t interval misleads)."""

    k: ClassVar[int]
    interval = "bootstrap"

    def _used(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(n, c) of the tasks with at least k samples, and which tasks those are."""
        used = rewards.lengths >= self.k
        return rewards.lengths[used], rewards.pass_counts[used], used

    @staticmethod
    def _scatter(score: np.ndarray, used: np.ndarray) -> np.ndarray:
        out = np.zeros(len(used))
        out[used] = score
        return out


@register_reducer("unbiased_pass@{k}")
class UnbiasedPassAtK(_Unbiased):
    """Chen et al. (2021): per task 1 - C(n-c, k) / C(n, k), the chance that k of its n samples
    drawn without replacement include a pass (c = passing samples)."""

    def task_scores(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        n, c, used = self._used(rewards)
        fails = n - c
        score = np.ones(len(n))  # fewer than k fails: every k-subset holds a pass
        some = fails >= self.k
        score[some] = 1.0 - comb_ratio(fails[some], n[some], self.k)
        return self._scatter(score, used), used


@register_reducer("unbiased_pass^{k}")
class UnbiasedPassHatK(_Unbiased):
    """tau-bench: per task C(c, k) / C(n, k), the chance that k of its n samples drawn without
    replacement all pass."""

    def task_scores(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        n, c, used = self._used(rewards)
        score = np.zeros(len(n))  # fewer than k passes: no k-subset passes throughout
        some = c >= self.k
        score[some] = comb_ratio(c[some], n[some], self.k)
        return self._scatter(score, used), used


def comb_ratio(a: np.ndarray, n: np.ndarray, k: int) -> np.ndarray:
    """C(a, k) / C(n, k) for k <= a <= n, elementwise.

    As in the Codex paper, a product instead of factorials (which overflow at n = 171):
    C(a, k) / C(n, k) = prod_{i=a+1..n} (1 - k / i). The products come from one table of
    cumulative log-terms up to max(n), so the whole array costs two lookups per task.
    """
    if len(n) == 0:
        return np.zeros(0)
    top = int(n.max())
    table = np.zeros(top + 1)
    if top > k:
        i = np.arange(k + 1, top + 1, dtype=np.float64)
        table[k + 1 :] = np.cumsum(np.log1p(-k / i))
    ratio: np.ndarray = np.exp(table[n] - table[a])
    return ratio
