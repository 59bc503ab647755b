"""Old name of `gym_metrics.reducers` (removal in 0.3.0): the reward reducers under their
first names. `Metric`, `MetricResult`, `get_metric`, `register_metric`, `registered_metrics`,
`resolve_metrics` and `summarize_metrics` warn and resolve through gym_metrics._util.deprecated."""

from __future__ import annotations

from gym_metrics._util.deprecated import old_names, warn_module

warn_module(__name__)

from gym_metrics.reducers import (  # noqa: E402
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
    TaskRewards,
    TaskRewardsLike,
    UnbiasedPassAtK,
    UnbiasedPassHatK,
    comb_ratio,
)


__getattr__ = old_names(__name__)


__all__ = [
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "GENERIC_RESAMPLES",
    "PASS_THRESHOLD",
    "Avg",
    "MeanOverTasks",
    "MeanReward",
    "PassAtK",
    "PassHatK",
    "PassRate",
    "TaskRewards",
    "TaskRewardsLike",
    "UnbiasedPassAtK",
    "UnbiasedPassHatK",
    "comb_ratio",
]
