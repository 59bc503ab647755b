"""tool_calling environment: verify over both row formats, errors, the shipped sample."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from gym_metrics_servers.tool_calling import SAMPLE_PATH, ToolCallingServer

from gym_metrics import InvalidInputError
from gym_metrics.evaluation._remote import score_fields
from gym_metrics import resolve_server

NAN = float("nan")
SCORES = (
    "tool_call_accuracy",
    "tool_call_accuracy_unordered",
    "function_name_accuracy",
    "function_name_and_args_accuracy",
)
SAMPLE_EXPECTED = {
    "exact": (1.0, 1.0, 1.0, 1.0),
    "two_in_order": (1.0, 1.0, 1.0, 1.0),
    "reordered": (0.0, 1.0, 1.0, 1.0),
    "extra_call": (0.0, 0.0, 0.0, 0.0),
    "missing_call": (0.0, 0.0, 0.0, 0.0),
    "wrong_value": (0.5, 0.5, 1.0, 0.0),
    "int_vs_string": (1.0, 1.0, 1.0, 0.0),
    "int_vs_float": (0.0, 0.0, 1.0, 1.0),
    "multi_turn": (1.0, 1.0, 1.0, 1.0),
    "no_calls": (1.0, 1.0, 1.0, 1.0),
    "bad_json_args": (None, None, 1.0, NAN),
}


def sample() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()]


def same(a: Any, b: Any) -> bool:
    return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b


async def test_sample_rows() -> None:
    env = ToolCallingServer()
    rows = sample()
    assert [r["id"] for r in rows] == list(SAMPLE_EXPECTED)
    for row in rows:
        response = await env.verify_model(row)
        got = tuple(getattr(response, name) for name in SCORES)
        assert all(same(g, e) for g, e in zip(got, SAMPLE_EXPECTED[row["id"]])), (row["id"], got)
        expected_reward = got[0] if got[0] is not None else 0.0
        assert response.reward == expected_reward


async def test_ragas_format_alone_gives_every_score() -> None:
    row = {k: v for k, v in sample()[2].items() if k not in ("response", "expected_tool_calls")}  # reordered
    response = await ToolCallingServer().verify_dict(row)
    assert [response[n] for n in SCORES] == [0.0, 1.0, 1.0, 1.0] and response["reward"] == 0.0


async def test_template_scores_come_from_the_openai_fields_when_present() -> None:
    row = sample()[0]
    row["expected_tool_calls"] = [{"function": {"name": "other", "arguments": {}}}]
    response = await ToolCallingServer().verify_dict(row)
    assert response["tool_call_accuracy"] == 1.0
    assert (response["function_name_accuracy"], response["function_name_and_args_accuracy"]) == (0.0, 0.0)


async def test_nan_args_score_is_null_on_the_wire() -> None:
    reward, text = await ToolCallingServer().verify_json(sample()[-1])
    wire = json.loads(text)
    assert reward == 0.0 and wire["function_name_and_args_accuracy"] is None and wire["tool_call_accuracy"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body_json.user_input"),
        (
            {
                "user_input": [{"content": "", "type": "ai", "tool_calls": [{"name": "f", "args": "{}"}]}],
                "reference_tool_calls": [],
            },
            "body_json.user_input[0].tool_calls[0].args",
        ),
        (
            {"user_input": [{"content": None, "type": "human"}], "reference_tool_calls": []},
            "body_json.user_input[0].content",
        ),
        ({"user_input": [{"content": "x", "type": "robot"}], "reference_tool_calls": []}, "body_json.user_input[0].type"),
        ({"user_input": []}, "body_json.reference_tool_calls"),
        ({"expected_tool_calls": []}, "body_json.response"),
        ({"user_input": "text", "reference_tool_calls": []}, "body_json.user_input"),
        # RAGAS's MultiTurnSample order rule: a tool message needs an ai message before it
        (
            {"user_input": [{"content": "hi", "type": "human"}, {"content": "x", "type": "tool"}], "reference_tool_calls": []},
            "body_json.user_input[1]",
        ),
        # and the other fields it types, though this metric does not read them
        ({"user_input": [], "reference_tool_calls": [], "reference": 5}, "body_json.reference"),
    ],
)
async def test_rows_that_cannot_be_scored_are_invalid_input(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        await ToolCallingServer().verify_model(body)
    assert info.value.violations[0].field == field


def test_registered_and_schema_names_the_scores() -> None:
    assert resolve_server("tool_calling") is ToolCallingServer
    schema = ToolCallingServer().server_info()["verify_response_schema"]
    assert score_fields(schema) == SCORES
