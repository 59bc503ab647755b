"""The evaluate API under its first import path: `from gym_metrics.evaluate import evaluate`
keeps working. The code lives in gym_metrics.evaluation (running a scorer over a dataset) and
gym_metrics.scorers (the scorers and their registry)."""

from __future__ import annotations

from typing import Any

from gym_metrics.evaluation import (
    EvaluationResult,
    Histogram,
    HistogramBin,
    Percentiles,
    RowFailure,
    ScoreStats,
    evaluate,
    evaluate_async,
)
from gym_metrics.scorers import (
    NoConfig,
    RowError,
    RowMetric,
    Scorer,
    get_row_metric,
    get_scorer,
    register_row_metric,
    register_scorer,
    row_metric_names,
    scorer_names,
)


def __getattr__(name: str) -> Any:
    if name == "evaluate_remote_async":  # loads grpc: only when asked for
        from gym_metrics.evaluation import evaluate_remote_async

        return evaluate_remote_async
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EvaluationResult",
    "Histogram",
    "HistogramBin",
    "NoConfig",
    "Percentiles",
    "RowError",
    "RowFailure",
    "RowMetric",
    "ScoreStats",
    "Scorer",
    "evaluate",
    "evaluate_async",
    "evaluate_remote_async",
    "get_row_metric",
    "get_scorer",
    "register_row_metric",
    "register_scorer",
    "row_metric_names",
    "scorer_names",
]
