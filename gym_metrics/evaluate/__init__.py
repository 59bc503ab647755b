"""Row metrics and dataset evaluation (SPEC C): score rows, aggregate the scores."""

from __future__ import annotations

from typing import Any

from gym_metrics.evaluate._base import NoConfig, RowError, RowMetric
from gym_metrics.evaluate._registry import get_row_metric, register_row_metric, row_metric_names
from gym_metrics.evaluate._result import EvaluationResult, Histogram, HistogramBin, Percentiles, RowFailure, ScoreStats
from gym_metrics.evaluate._run import evaluate, evaluate_async


def __getattr__(name: str) -> Any:
    # Scoring through a server needs grpc; in-process evaluation never loads it.
    if name == "evaluate_remote_async":
        from gym_metrics.evaluate._remote import evaluate_remote_async

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
    "evaluate",
    "evaluate_async",
    "evaluate_remote_async",
    "get_row_metric",
    "register_row_metric",
    "row_metric_names",
]
