"""The reward reducers under their first names (`from gym_metrics.metrics import Metric,
register_metric`, `get_metric`, as the README shows): the code lives in gym_metrics.reducers,
where `Metric` is `Reducer`, `register_metric` is `register_reducer` and so on."""

from __future__ import annotations

from gym_metrics.reducers import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    GENERIC_RESAMPLES,
    PASS_THRESHOLD,
    Avg,
    MeanOverTasks,
    MeanReward,
    PassAtK,
    PassHatK,
    PassRate,
    Reducer,
    ReducerResult,
    TaskRewards,
    TaskRewardsLike,
    UnbiasedPassAtK,
    UnbiasedPassHatK,
    comb_ratio,
    get_reducer,
    reducer_names,
    register_reducer,
    resolve_reducers,
    summarize_reducers,
)
from gym_metrics.reducers import OLD_ENTRY_POINT_GROUP as ENTRY_POINT_GROUP

Metric = Reducer
MetricResult = ReducerResult
get_metric = get_reducer
register_metric = register_reducer
registered_metrics = reducer_names
resolve_metrics = resolve_reducers
summarize_metrics = summarize_reducers

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
