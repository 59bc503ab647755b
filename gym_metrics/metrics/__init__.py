"""Reward reducers by name (SPEC B): `get_metric("pass@8").summarize(task_rewards)`.

Built-ins: `mean_reward` (alias `avg`), `pass_rate`, first-k `pass@{k}` / `pass^{k}`, and the
unbiased estimators `unbiased_pass@{k}` (Chen et al. 2021) / `unbiased_pass^{k}` (tau-bench).
Add one with `@register_metric("name")`, or from another package through the entry-point
group `gym_metrics.metrics`.
"""

from __future__ import annotations

from collections.abc import Iterable

from gym_metrics.metrics._base import GENERIC_RESAMPLES, MeanOverTasks, Metric, MetricResult
from gym_metrics.metrics._builtin import (
    Avg,
    MeanReward,
    PassAtK,
    PassHatK,
    PassRate,
    UnbiasedPassAtK,
    UnbiasedPassHatK,
    comb_ratio,
)
from gym_metrics.metrics._registry import (
    ENTRY_POINT_GROUP,
    get_metric,
    register_metric,
    registered_metrics,
    resolve_metrics,
)
from gym_metrics.metrics._rewards import PASS_THRESHOLD, TaskRewards, TaskRewardsLike
from gym_metrics.metrics._uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED


def summarize_metrics(
    names: Iterable[str], task_rewards: TaskRewardsLike, *, seed: int = DEFAULT_SEED
) -> dict[str, float | int]:
    """Each named reducer's value and uncertainty keys (`name`, `name/stderr`,
    `name/ci_low_95`, `name/ci_high_95`, `name/tasks_used`, `name/tasks_dropped`), in order:
    what a server adds to agent_metrics."""
    rewards = TaskRewards.of(task_rewards)
    out: dict[str, float | int] = {}
    for name, metric in resolve_metrics(names).items():
        out.update(metric.summarize(rewards, seed=seed).as_metrics(name))
    return out


__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "ENTRY_POINT_GROUP",
    "GENERIC_RESAMPLES",
    "PASS_THRESHOLD",
    "Avg",
    "MeanOverTasks",
    "MeanReward",
    "Metric",
    "MetricResult",
    "PassAtK",
    "PassHatK",
    "PassRate",
    "TaskRewards",
    "TaskRewardsLike",
    "UnbiasedPassAtK",
    "UnbiasedPassHatK",
    "comb_ratio",
    "get_metric",
    "register_metric",
    "registered_metrics",
    "resolve_metrics",
    "summarize_metrics",
]
