"""The agentic metrics as row metrics: `evaluate --metric tool_call_accuracy | tool_calling`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pydantic

from gym_metrics.scorers.tool_calls._tool_call_accuracy import (
    check_sample_fields,
    predicted_calls,
    reference_calls,
    score_tool_calls,
)
from gym_metrics.scorers.tool_calls._tool_calling import (
    ARGS_SCORE,
    NAME_SCORE,
    response_tool_calls,
    tool_calling_scores,
)
from gym_metrics.scorers import Scorer, register_scorer


class ToolCallAccuracyConfig(pydantic.BaseModel):
    """Options of `tool_call_accuracy`."""

    model_config = pydantic.ConfigDict(extra="forbid")

    strict_order: bool = True
    """True (RAGAS's and NeMo Evaluator's default): calls must come in the reference's order.
    False: both lists are sorted (by name, then arguments) before comparing."""


@register_scorer("tool_call_accuracy")
class ToolCallAccuracyScorer(Scorer):
    """RAGAS 0.4.3 ToolCallAccuracy over `user_input` / `reference_tool_calls` rows
    (docs/metrics.md#tool-call-accuracy)."""

    score_names = ("tool_call_accuracy",)
    Config = ToolCallAccuracyConfig
    eager = True  # pure CPU

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        predicted = predicted_calls(row.get("user_input"))
        reference = reference_calls(row.get("reference_tool_calls"))
        check_sample_fields(row, reference_tool_calls=False)  # checked just above
        return {"tool_call_accuracy": score_tool_calls(predicted, reference, self.config.strict_order)}  # type: ignore[attr-defined]


class ToolCallingConfig(pydantic.BaseModel):
    """Options of `tool_calling`."""

    model_config = pydantic.ConfigDict(extra="forbid")

    reference_field: str = "expected_tool_calls"
    """The row field holding the reference calls (what NeMo Evaluator's `reference` template,
    e.g. `{{item.expected_tool_calls}}`, points at)."""


@register_scorer("tool_calling")
class ToolCallingScorer(Scorer):
    """NeMo Evaluator's tool-calling template metric (docs/metrics.md#tool-calling-template):
    predictions from the row's
    `response.choices[0].message.tool_calls`, references from `expected_tool_calls`."""

    score_names = (NAME_SCORE, ARGS_SCORE)
    Config = ToolCallingConfig
    eager = True  # pure CPU

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        field = self.config.reference_field  # type: ignore[attr-defined]
        tool_calls = response_tool_calls(row.get("response"))
        return tool_calling_scores(
            tool_calls,
            row.get(field),
            reference_field=field,
            tool_calls_field="response.choices[0].message.tool_calls",
        )
