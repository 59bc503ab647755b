"""tool_calling: tool-call accuracy (RAGAS) and the tool-calling template metric (NeMo
Evaluator) as an environment. `verify` scores one row with both metrics; the reward is the
strict-order tool call accuracy. See README.md for the row formats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, register_server
from gym_metrics.scorers.tool_calls import (
    check_sample_fields,
    predicted_calls,
    reference_calls,
    response_tool_calls,
    score_tool_calls,
    tool_calling_scores,
    tool_calling_scores_from_calls,
)
from gym_metrics.environments import ScorerEnvironment
from gym_metrics.scorers import RowError, Scorer

SAMPLE_PATH = Path(__file__).with_name("sample.jsonl")
"""The shipped sample: a dozen rows covering matches, misses and one malformed prediction."""


class ToolCallingVerifyRequest(BaseVerifyRequest):
    """One row in the RAGAS format, the OpenAI format, or both (see README.md)."""

    user_input: list[Any] | None = None
    """RAGAS format: the conversation, `[{content, type: human|ai|tool, tool_calls}]`."""
    reference_tool_calls: list[Any] | None = None
    """RAGAS format: the expected calls, `[{name, args}]`."""
    expected_tool_calls: list[Any] | str | None = None
    """OpenAI format: the expected calls, `[{function: {name, arguments}}]`, scored against
    `response.choices[0].message.tool_calls` (a chat-completions response)."""


class ToolCallingVerifyResponse(BaseVerifyResponse):
    """Every score of the row; null where the row's format does not give it (or, for the
    args score, where a predicted `arguments` is not JSON)."""

    tool_call_accuracy: float | None = None
    """RAGAS ToolCallAccuracy, strict order (what NeMo Evaluator reports)."""
    tool_call_accuracy_unordered: float | None = None
    """RAGAS ToolCallAccuracy with `strict_order=False`."""
    function_name_accuracy: float | None = None
    """1.0 iff the sets of predicted and reference function names are equal."""
    function_name_and_args_accuracy: float | None = None
    """1.0 iff the names match and, per name, the arguments are equal as JSON values."""


class ToolCallingRowScorer(Scorer):
    """Both metrics on one row (RAGAS and/or OpenAI format); a score the row's format does not
    give is left out (null in the response)."""

    name = "tool_calling"
    score_names = (
        "tool_call_accuracy", "tool_call_accuracy_unordered", "function_name_accuracy", "function_name_and_args_accuracy"
    )
    eager = True

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        user_input, reference_tool_calls = row.get("user_input"), row.get("reference_tool_calls")
        expected = row.get("expected_tool_calls")
        ragas = user_input is not None or reference_tool_calls is not None
        if not ragas and expected is None:
            raise RowError(
                "user_input",
                "missing: send user_input + reference_tool_calls (RAGAS format) and/or "
                "expected_tool_calls + response.choices (OpenAI format)",
            )
        scores: dict[str, float] = {}
        if ragas:
            predicted = predicted_calls(user_input)
            reference = reference_calls(reference_tool_calls)
            check_sample_fields(row, reference_tool_calls=False)  # reference, rubrics, reference_topics
            scores["tool_call_accuracy"] = score_tool_calls(predicted, reference, strict_order=True)
            scores["tool_call_accuracy_unordered"] = score_tool_calls(predicted, reference, strict_order=False)
            if expected is None:
                scores.update(tool_calling_scores_from_calls(predicted, reference))
        if expected is not None:
            scores.update(
                tool_calling_scores(
                    response_tool_calls(row.get("response")),
                    expected,
                    reference_field="expected_tool_calls",
                    tool_calls_field="response.choices[0].message.tool_calls",
                )
            )
        return scores


@register_server("tool_calling")
class ToolCallingServer(ScorerEnvironment):
    """reward = tool_call_accuracy (or, for an OpenAI-format-only row,
    function_name_and_args_accuracy, 0.0 when that is NaN)."""

    name = "tool_calling"
    eager_verify = True  # pure CPU: no Task per rollout before Python 3.12
    key_metrics = ["mean/reward", "mean/tool_call_accuracy_unordered", "mean/function_name*"]
    invalid_message = "row cannot be scored"

    def load_scorer(self) -> Scorer:
        return ToolCallingRowScorer()

    def build_row(self, body: ToolCallingVerifyRequest) -> dict[str, Any]:  # type: ignore[override]
        """The extra fields (reference, rubrics, ...) and the declared ones, not copied."""
        return {
            **(body.model_extra or {}),
            "user_input": body.user_input,
            "reference_tool_calls": body.reference_tool_calls,
            "expected_tool_calls": body.expected_tool_calls,
            "response": body.response,
        }

    def reward(self, scorer: Scorer, scores: Mapping[str, float]) -> float:
        reward = scores.get("tool_call_accuracy")
        if reward is None:
            args = scores["function_name_and_args_accuracy"]
            reward = 0.0 if math.isnan(args) else args
        return reward

    async def verify(self, body: ToolCallingVerifyRequest) -> ToolCallingVerifyResponse:
        return await self.score_rollout(body)


__all__ = ["SAMPLE_PATH", "ToolCallingRowScorer", "ToolCallingServer", "ToolCallingVerifyRequest", "ToolCallingVerifyResponse"]
