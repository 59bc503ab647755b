"""tool_calling (docs/metrics.md#tool-calling-template): NeMo Evaluator's tool-calling template
metric over OpenAI tool calls."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from gym_metrics.scorers.tool_calls import (
    ToolCall,
    response_tool_calls,
    tool_calling_scores,
    tool_calling_scores_from_calls,
)
from gym_metrics.evaluation import evaluate
from gym_metrics.scorers import RowError


def pred(name: str, arguments: Any) -> dict[str, Any]:
    """A predicted call: `arguments` is JSON text (a dict is dumped; other values kept as-is)."""
    text = json.dumps(arguments) if isinstance(arguments, dict) else arguments
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": text}}


def gt(name: str, arguments: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def scores(tool_calls: Any, reference: Any) -> tuple[float, float]:
    s = tool_calling_scores(tool_calls, reference)
    return s["function_name_accuracy"], s["function_name_and_args_accuracy"]


def row(tool_calls: Any, reference: Any) -> dict[str, Any]:
    return {
        "response": {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": tool_calls}}]},
        "expected_tool_calls": reference,
    }


@pytest.mark.parametrize(
    ("tool_calls", "reference", "expected"),
    [
        ([pred("f", {"a": 1})], [gt("f", {"a": 1})], (1.0, 1.0)),
        # order is ignored (parallel calls)
        ([pred("g", {}), pred("f", {"a": 1})], [gt("f", {"a": 1}), gt("g", {})], (1.0, 1.0)),
        # names are a SET: a duplicated call still matches; the last call of a name wins
        ([pred("f", {"a": 0}), pred("f", {"a": 1})], [gt("f", {"a": 1})], (1.0, 1.0)),
        ([pred("f", {"a": 1}), pred("f", {"a": 0})], [gt("f", {"a": 1})], (1.0, 0.0)),
        ([pred("f", {"a": 1})], [gt("f", {"a": 0}), gt("f", {"a": 1})], (1.0, 1.0)),
        # missing or extra names fail both scores
        ([pred("f", {"a": 1})], [gt("f", {"a": 1}), gt("g", {})], (0.0, 0.0)),
        ([pred("f", {"a": 1}), pred("g", {})], [gt("f", {"a": 1})], (0.0, 0.0)),
        ([pred("F", {"a": 1})], [gt("f", {"a": 1})], (0.0, 0.0)),  # case-sensitive
        # arguments compare as decoded JSON values with Python ==
        ([pred("f", {"n": 5})], [gt("f", {"n": 5.0})], (1.0, 1.0)),
        ([pred("f", {"n": "5"})], [gt("f", {"n": 5})], (1.0, 0.0)),
        ([pred("f", {"a": 1, "b": 2})], [gt("f", {"b": 2, "a": 1})], (1.0, 1.0)),  # key order ignored
        ([pred("f", {"a": 1, "extra": 0})], [gt("f", {"a": 1})], (1.0, 0.0)),  # an extra argument fails
        ([pred("f", {})], [gt("f", {"a": 1})], (1.0, 0.0)),
        ([pred("f", {"cfg": {"x": [1, {"y": True}]}})], [gt("f", {"cfg": {"x": [1, {"y": True}]}})], (1.0, 1.0)),
        ([pred("f", {"cfg": {"x": [1, 2]}})], [gt("f", {"cfg": {"x": [2, 1]}})], (1.0, 0.0)),
        # null arguments decode to {}
        ([pred("f", None)], [gt("f", {})], (1.0, 1.0)),
        # no calls on either side
        (None, [], (1.0, 1.0)),
        ([], [], (1.0, 1.0)),
        (None, [gt("f", {})], (0.0, 0.0)),
        # a call without a function name is skipped
        ([{"type": "function", "function": {"arguments": "{}"}}, pred("f", {})], [gt("f", {})], (1.0, 1.0)),
        # a reference given as JSON text (a template rendered with `| tojson`)
        ([pred("f", {"a": 1})], json.dumps([gt("f", {"a": 1})]), (1.0, 1.0)),
        # reference arguments are not decoded: JSON text never equals a decoded object
        ([pred("f", {"a": 1})], [gt("f", '{"a": 1}')], (1.0, 0.0)),
    ],
)
def test_scores(tool_calls: Any, reference: Any, expected: tuple[float, float]) -> None:
    assert scores(tool_calls, reference) == expected


@pytest.mark.parametrize("arguments", ['{"a": 1', "not json", {"a": 1}, 5, ""])
def test_undecodable_arguments_give_nan_args_score(arguments: Any) -> None:
    call = {"function": {"name": "f", "arguments": arguments}}
    name, args = scores([call], [gt("f", {"a": 1})])
    assert name == 1.0 and math.isnan(args)
    # NaN even when the names do not match (NeMo Evaluator decodes before comparing names)
    name, args = scores([call], [gt("g", {"a": 1})])
    assert name == 0.0 and math.isnan(args)


@pytest.mark.parametrize(
    ("tool_calls", "reference", "field"),
    [
        ([], {"function": {"name": "f", "arguments": {}}}, "reference"),
        ([], "not json", "reference"),
        ([], ["f"], "reference[0]"),
        ([], [{"name": "f", "arguments": {}}], "reference[0].function"),
        ([], [{"function": {"arguments": {}}}], "reference[0].function.name"),
        ([], [{"function": {"name": "f"}}], "reference[0].function.arguments"),
        ({"function": {"name": "f"}}, [], "tool_calls"),
        (["f"], [], "tool_calls[0]"),
        ([{"function": "f"}], [], "tool_calls[0].function"),
        ([{"function": {"name": ["f"], "arguments": "{}"}}], [], "tool_calls"),
    ],
)
def test_malformed_rows(tool_calls: Any, reference: Any, field: str) -> None:
    with pytest.raises(RowError) as info:
        tool_calling_scores(tool_calls, reference)
    assert info.value.field == field


@pytest.mark.parametrize(
    ("response", "field"),
    [
        (None, "response"),
        ({}, "response"),
        ("text", "response"),
        ({"choices": []}, "response.choices"),
        ({"choices": [{}]}, "response.choices[0].message"),
        ({"choices": [{"message": "hi"}]}, "response.choices[0].message"),
    ],
)
def test_response_shape(response: Any, field: str) -> None:
    with pytest.raises(RowError) as info:
        response_tool_calls(response)
    assert info.value.field == field


def test_from_decoded_calls_matches_openai_form() -> None:
    """The RAGAS-format shortcut gives what the OpenAI form of the same calls gives."""
    predicted = [ToolCall("f", {"a": 1}), ToolCall("g", {"n": 5}), ToolCall("f", {"a": 2})]
    for reference in (
        [ToolCall("f", {"a": 2}), ToolCall("g", {"n": 5.0})],
        [ToolCall("f", {"a": 1}), ToolCall("g", {"n": 5})],
        [ToolCall("f", {"a": 2})],
    ):
        openai = tool_calling_scores(
            [pred(c.name, dict(c.args)) for c in predicted], [gt(c.name, dict(c.args)) for c in reference]
        )
        assert tool_calling_scores_from_calls(predicted, reference) == openai


def test_metric_through_evaluate() -> None:
    rows = [
        row([pred("f", {"a": 1})], [gt("f", {"a": 1})]),
        row([pred("f", {"a": 2})], [gt("f", {"a": 1})]),
        row([{"function": {"name": "f", "arguments": "{oops"}}], [gt("f", {"a": 1})]),  # NaN args, no error
        {"expected_tool_calls": []},  # no response: a row error
    ]
    result = evaluate("tool_calling", rows)
    assert result.score_names == ("function_name_accuracy", "function_name_and_args_accuracy")
    assert result.column("function_name_accuracy").tolist()[:3] == [1.0, 1.0, 1.0]
    args = result.column("function_name_and_args_accuracy")
    assert args[:2].tolist() == [1.0, 0.0] and math.isnan(args[2])
    assert list(result.errors) == [3] and result.errors[3].field == "response"
    by_name = {s["name"]: s for s in result.aggregate_scores}
    assert by_name["function_name_accuracy"]["count"] == 3
    assert (
        by_name["function_name_and_args_accuracy"]["count"],
        by_name["function_name_and_args_accuracy"]["nan_count"],
    ) == (2, 2)


def test_reference_field_is_configurable() -> None:
    r = row([pred("f", {"a": 1})], None)
    r["tool_calls"] = [gt("f", {"a": 1})]  # NeMo data flywheel naming: item.tool_calls
    result = evaluate("tool_calling", [r], config={"reference_field": "tool_calls"})
    assert result.values.tolist() == [[1.0, 1.0]]
    failed = evaluate("tool_calling", [r])  # default field expected_tool_calls is null here
    assert failed.errors[0].field == "expected_tool_calls"
