"""Reward reducers by name: `get_reducer("pass@8").summarize(task_rewards)`.

Definitions: docs/metrics.md#reward-reducers.

Built-ins: `mean_reward` (alias `avg`), `pass_rate`, first-k `pass@{k}` / `pass^{k}`, and the
unbiased estimators `unbiased_pass@{k}` (Chen et al. 2021) / `unbiased_pass^{k}` (tau-bench).
Add one with `@register_reducer("name")`, or from another package through the entry-point
group `gym_metrics.reducers`.
"""

from __future__ import annotations

from collections.abc import Iterable

from gym_metrics.reducers._base import GENERIC_RESAMPLES, MeanOverTasks, Reducer, ReducerResult
from gym_metrics.reducers._builtin import (
    Avg,
    MeanReward,
    PassAtK,
    PassHatK,
    PassRate,
    UnbiasedPassAtK,
    UnbiasedPassHatK,
    comb_ratio,
)
from gym_metrics.reducers._economics import PREFIX as ECONOMICS_PREFIX
from gym_metrics.reducers._economics import economics
from gym_metrics.reducers._registry import (
    ENTRY_POINT_GROUP,
    REDUCERS,
    get_reducer,
    register_reducer,
    reducer_names,
    resolve_reducers,
)
from gym_metrics.reducers._rewards import PASS_THRESHOLD, TaskRewards, TaskRewardsLike, passes
from gym_metrics.reducers._uncertainty import DEFAULT_RESAMPLES, DEFAULT_SEED


def summarize_reducers(
    names: Iterable[str], task_rewards: TaskRewardsLike, *, seed: int = DEFAULT_SEED
) -> dict[str, float | int]:
    """Each named reducer's value and uncertainty keys (`name`, `name/stderr`,
    `name/ci_low_95`, `name/ci_high_95`, `name/tasks_used`, `name/tasks_dropped`), in order:
    what a server adds to agent_metrics."""
    rewards = TaskRewards.of(task_rewards)
    out: dict[str, float | int] = {}
    for name, reducer in resolve_reducers(names).items():
        out.update(reducer.summarize(rewards, seed=seed).as_metrics(name))
    return out


__all__ = [
    "ECONOMICS_PREFIX",
    "economics",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "ENTRY_POINT_GROUP",
    "GENERIC_RESAMPLES",
    "PASS_THRESHOLD",
    "Avg",
    "MeanOverTasks",
    "MeanReward",
    "PassAtK",
    "PassHatK",
    "PassRate",
    "REDUCERS",
    "Reducer",
    "ReducerResult",
    "TaskRewards",
    "TaskRewardsLike",
    "UnbiasedPassAtK",
    "UnbiasedPassHatK",
    "comb_ratio",
    "get_reducer",
    "passes",
    "register_reducer",
    "reducer_names",
    "resolve_reducers",
    "summarize_reducers",
]
