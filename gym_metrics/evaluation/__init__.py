"""Run a scorer over a dataset (in process, or through a running environment): per-row scores
and their statistics, as NeMo Evaluator writes them (docs/metrics.md#row-scorers)."""

from __future__ import annotations

from typing import Any

from gym_metrics._util.deprecated import old_name
from gym_metrics.evaluation._config import read_scorer_config
from gym_metrics.evaluation._jsonl import read_rows
from gym_metrics.evaluation._progress import RowProgress
from gym_metrics.evaluation._result import EvaluationScores, Histogram, HistogramBin, Percentiles, RowFailure, ScoreMatrix, ScoreStats
from gym_metrics.evaluation._online import ToolEnvironment, online_parts
from gym_metrics.evaluation._run import RowSink, evaluate, evaluate_async, score_rows


def __getattr__(name: str) -> Any:
    # Scoring through a server needs grpc; in-process evaluation never loads it.
    if name == "evaluate_remote_async":
        from gym_metrics.evaluation._remote import evaluate_remote_async

        return evaluate_remote_async
    return old_name(__name__, name)


__all__ = [
    "EvaluationScores",
    "Histogram",
    "HistogramBin",
    "Percentiles",
    "RowFailure",
    "RowProgress",
    "RowSink",
    "ScoreMatrix",
    "ScoreStats",
    "ToolEnvironment",
    "evaluate",
    "evaluate_async",
    "evaluate_remote_async",
    "online_parts",
    "read_rows",
    "read_scorer_config",
    "score_rows",
]
