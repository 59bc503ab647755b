"""Old name of `gym_metrics.evaluation` (removal in 0.3.0): `from gym_metrics.evaluate import
evaluate` keeps working; import it from gym_metrics.evaluation. `EvaluationResult`,
`RowMetric`, `get_row_metric`, `register_row_metric` and `row_metric_names` warn and resolve
through gym_metrics._util.deprecated."""

from __future__ import annotations

import importlib

from gym_metrics._util.deprecated import old_name, warn_module

warn_module(__name__)

from gym_metrics.evaluation import (  # noqa: E402
    Histogram,
    HistogramBin,
    Percentiles,
    RowFailure,
    ScoreStats,
    evaluate,
    evaluate_async,
)
from gym_metrics.scorers import NoConfig, RowError, Scorer, get_scorer, register_scorer, scorer_names  # noqa: E402


def __getattr__(name: str) -> object:
    if name == "evaluate_remote_async":  # loads grpc: only when asked for
        return importlib.import_module("gym_metrics.evaluation").evaluate_remote_async
    return old_name(__name__, name)


__all__ = [
    "Histogram",
    "HistogramBin",
    "NoConfig",
    "Percentiles",
    "RowError",
    "RowFailure",
    "ScoreStats",
    "Scorer",
    "evaluate",
    "evaluate_async",
    "evaluate_remote_async",
    "get_scorer",
    "register_scorer",
    "scorer_names",
]
