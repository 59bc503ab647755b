"""Scorers: one dataset row in, named scores out (tool calls, LLM judges, remote endpoints).

Each family is a subpackage: `tool_calls` (RAGAS tool call accuracy, NeMo Evaluator's
tool-calling metric), `judge` (LLM-judge scorers), `remote` (a user's REST endpoint). Find one
by name with `get_scorer`; add one with `@register_scorer("name")` on a `Scorer` subclass, or
from another package through the entry-point group `gym_metrics.scorers`. Serve one as an
environment by subclassing `gym_metrics.environments.ScorerEnvironment`.
The first names `RowMetric`, `register_row_metric`, `get_row_metric` and `row_metric_names`
still work until 0.3.0, with a DeprecationWarning (gym_metrics._util.deprecated).
"""

from __future__ import annotations

from gym_metrics.scorers._base import (
    ENTRY_POINT_GROUP,
    SCORERS,
    NoConfig,
    RowError,
    Scorer,
    get_scorer,
    register_scorer,
    scorer_names,
)
from gym_metrics._util.deprecated import old_names

__all__ = [
    "ENTRY_POINT_GROUP",
    "SCORERS",
    "NoConfig",
    "RowError",
    "Scorer",
    "get_scorer",
    "register_scorer",
    "scorer_names",
]


__getattr__ = old_names(__name__)
