"""Tool-calling template metric: NeMo Evaluator's `ToolCallingScorer`.

Definition: docs/metrics.md#tool-calling-template.

Predicted calls are OpenAI chat-completions tool calls (`{"function": {"name", "arguments":
"<JSON text>"}}`), references the same shape with `arguments` as an object. Two 0/1 scores:

- `function_name_accuracy`: the SET of predicted names equals the set of reference names;
- `function_name_and_args_accuracy`: names match and, per reference name, the predicted
  arguments decoded with `json.loads` equal the reference arguments with Python `==`
  (5 == 5.0, key order ignored, an extra argument fails). With a repeated name the last call
  of that name wins, on both sides. Predicted `arguments` that do not decode (or are not a
  string) make this score NaN, as in NeMo Evaluator, even when the names differ.

Order is ignored (parallel calls) and names are case-sensitive.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from gym_metrics._util.jsonio import json_kind
from gym_metrics.scorers.tool_calls._tool_call_accuracy import ToolCall, _is_list
from gym_metrics.scorers import RowError

NAME_SCORE = "function_name_accuracy"
ARGS_SCORE = "function_name_and_args_accuracy"


def tool_calling_scores(
    tool_calls: Any, reference: Any, *, reference_field: str = "reference", tool_calls_field: str = "tool_calls"
) -> dict[str, float]:
    """Both scores for predicted OpenAI `tool_calls` (a list, or null for none) against the
    reference list; raises RowError for a malformed reference or prediction."""
    ref_names, ref_args = _reference(reference, reference_field)
    calls = _predicted(tool_calls, tool_calls_field)
    names = [function["name"] for function in calls]
    try:
        names_match = set(ref_names) == set(names)
    except TypeError:
        raise RowError(tool_calls_field, "function names must be strings") from None
    args_score = 0.0
    try:
        pred_args = {}
        for function in calls:
            raw = function.get("arguments")
            pred_args[function["name"]] = {} if raw is None else json.loads(raw)
    except (json.JSONDecodeError, TypeError):
        args_score = float("nan")  # a call whose arguments are not JSON text
    else:
        if names_match:
            args_score = 1.0 if all(pred_args.get(name) == args for name, args in ref_args.items()) else 0.0
    return {NAME_SCORE: 1.0 if names_match else 0.0, ARGS_SCORE: args_score}


def response_tool_calls(response: Any, field: str = "response") -> Any:
    """`response.choices[0].message.tool_calls` of a chat-completions response (None when the
    message has none); RowError when the response is not that shape."""
    if not response:
        raise RowError(field, "missing: the model's chat-completions response is required")
    if not isinstance(response, Mapping):
        raise RowError(field, f"must be a chat-completions response object, got {json_kind(response)}")
    choices = response.get("choices")
    if not _is_list(choices) or not choices:
        raise RowError(f"{field}.choices", "must be a non-empty list")
    choice = choices[0]
    if not isinstance(choice, Mapping) or "message" not in choice:
        raise RowError(f"{field}.choices[0].message", "missing")
    message = choice["message"]
    if not isinstance(message, Mapping):
        raise RowError(f"{field}.choices[0].message", f"must be an object, got {json_kind(message)}")
    return message.get("tool_calls")


def _reference(reference: Any, field: str) -> tuple[list[str], dict[str, Any]]:
    """Names in order and the last arguments seen per name."""
    if isinstance(reference, str):  # a template rendered with `| tojson`
        try:
            reference = json.loads(reference)
        except json.JSONDecodeError as exc:
            raise RowError(field, f"is a string but not JSON: {exc}") from None
    if not _is_list(reference):
        raise RowError(field, f"must be a list of OpenAI-style tool calls, got {json_kind(reference)}")
    names: list[str] = []
    args: dict[str, Any] = {}
    for i, call in enumerate(reference):
        where = f"{field}[{i}]"
        if not isinstance(call, Mapping):
            raise RowError(where, f"must be a tool call object, got {json_kind(call)}")
        function = call.get("function")
        if not isinstance(function, Mapping):
            raise RowError(
                f"{where}.function",
                "missing: must be an object {name, arguments}"
                if function is None
                else f"must be an object, got {json_kind(function)}",
            )
        name = function.get("name")
        if not isinstance(name, str):
            raise RowError(
                f"{where}.function.name",
                "missing: must be a string" if name is None else f"must be a string, got {json_kind(name)}",
            )
        if "arguments" not in function:
            raise RowError(f"{where}.function.arguments", "missing")
        names.append(name)
        args[name] = function["arguments"]
    return names, args


def _predicted(tool_calls: Any, field: str) -> list[Mapping[str, Any]]:
    """The `function` objects of the calls that name a function (others are skipped, as in
    NeMo Evaluator)."""
    if not tool_calls:
        return []
    if not _is_list(tool_calls):
        raise RowError(field, f"must be a list, got {json_kind(tool_calls)}")
    out = []
    for i, call in enumerate(tool_calls):
        if not isinstance(call, Mapping):
            raise RowError(f"{field}[{i}]", f"must be a tool call object, got {json_kind(call)}")
        function = call.get("function", {})
        if not isinstance(function, Mapping):
            raise RowError(f"{field}[{i}].function", f"must be an object, got {json_kind(function)}")
        if "name" in function:
            out.append(function)
    return out


def tool_calling_scores_from_calls(predicted: Sequence[ToolCall], reference: Sequence[ToolCall]) -> dict[str, float]:
    """The same two scores over calls whose arguments are already decoded (e.g. RAGAS-format
    rows): what NeMo Evaluator gives for those calls written in OpenAI format."""
    names_match = {p.name for p in predicted} == {r.name for r in reference}
    pred_args = {p.name: p.args for p in predicted}
    ref_args = {r.name: r.args for r in reference}
    args_match = names_match and all(pred_args.get(name) == args for name, args in ref_args.items())
    return {NAME_SCORE: 1.0 if names_match else 0.0, ARGS_SCORE: 1.0 if args_match else 0.0}
