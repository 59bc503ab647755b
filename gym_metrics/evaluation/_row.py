"""One row scored: its outcome, whatever the scorer raises (offline and online runs share it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gym_metrics.evaluation._result import RowFailure
from gym_metrics.scorers import RowError, Scorer

Outcome = tuple["Mapping[str, Any] | None", "RowFailure | None", "Mapping[str, Any] | None"]
"""A row's scores, its failure, and what was generated for it (online only)."""


async def score_row(metric: Scorer, row: Mapping[str, Any]) -> Outcome:
    """One row's outcome; whatever the metric raises is the row's error, never the run's."""
    try:
        return await metric.score(row), None, None
    except RowError as exc:
        return None, RowFailure(exc.field, exc.reason), None
    except Exception as exc:  # a bug or an unexpected row shape: recorded, never fatal
        return None, RowFailure("row", f"{type(exc).__name__}: {exc}"), None
