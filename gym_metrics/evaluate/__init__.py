"""Row metrics and dataset evaluation (SPEC C): score rows, aggregate the scores."""

from __future__ import annotations

from gym_metrics.evaluate._base import NoConfig, RowError, RowMetric
from gym_metrics.evaluate._registry import get_row_metric, register_row_metric, row_metric_names

__all__ = ["NoConfig", "RowError", "RowMetric", "get_row_metric", "register_row_metric", "row_metric_names"]
