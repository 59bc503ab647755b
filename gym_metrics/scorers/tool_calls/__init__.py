"""Agentic metrics that need no judge: tool call accuracy (RAGAS) and the tool-calling
template metric (NeMo Evaluator), as plain functions and as scorers (docs/metrics.md:
#tool-call-accuracy, #tool-calling-template)."""

from __future__ import annotations

from gym_metrics.scorers.tool_calls._scorers import ToolCallAccuracyScorer, ToolCallingScorer
from gym_metrics.scorers.tool_calls._tool_call_accuracy import (
    ToolCall,
    check_sample_fields,
    predicted_calls,
    reference_calls,
    score_tool_calls,
    tool_call_accuracy,
)
from gym_metrics.scorers.tool_calls._tool_calling import (
    response_tool_calls,
    tool_calling_scores,
    tool_calling_scores_from_calls,
)

from gym_metrics._util.deprecated import old_names

__all__ = [
    "ToolCall",
    "ToolCallAccuracyScorer",
    "ToolCallingScorer",
    "check_sample_fields",
    "predicted_calls",
    "reference_calls",
    "response_tool_calls",
    "score_tool_calls",
    "tool_call_accuracy",
    "tool_calling_scores",
    "tool_calling_scores_from_calls",
]


__getattr__ = old_names(__name__)
