"""Chat-completions <-> Responses API shapes, and reasoning stripping."""

from __future__ import annotations

import json

from gym_metrics.targets import (
    chat_request_to_responses,
    chat_to_responses,
    output_text,
    output_tool_calls,
    responses_request_to_chat,
    strip_reasoning,
)


def test_a_chat_answer_with_text_and_tool_calls_becomes_responses_shaped() -> None:
    completion = {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "Let me look.",
                    "reasoning_content": "they want weather",
                    "tool_calls": [
                        {"id": "call_a", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                        {"id": "call_b", "type": "function", "function": {"name": "time", "arguments": {"tz": "CET"}}},
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }
    response = chat_to_responses(completion)
    kinds = [item["type"] for item in response["output"]]
    assert kinds == ["reasoning", "message", "function_call", "function_call"]
    message = response["output"][1]
    assert message["role"] == "assistant"
    assert message["content"] == [{"type": "output_text", "text": "Let me look.", "annotations": []}]
    call = response["output"][2]
    assert (call["name"], call["arguments"], call["call_id"]) == ("weather", '{"city": "Paris"}', "call_a")
    assert json.loads(response["output"][3]["arguments"]) == {"tz": "CET"}
    assert response["usage"] == {
        "input_tokens": 11, "output_tokens": 7, "total_tokens": 18,
        "input_tokens_details": {"cached_tokens": None}, "output_tokens_details": {"reasoning_tokens": None},
    }  # fmt: skip
    assert output_text(response) == "Let me look."
    assert output_tool_calls(response) == [
        {"name": "weather", "arguments": {"city": "Paris"}, "call_id": "call_a"},
        {"name": "time", "arguments": {"tz": "CET"}, "call_id": "call_b"},
    ]


def test_a_chat_answer_without_usage_or_text() -> None:
    """An empty answer is still a message (empty text), as NeMo Gym's converter makes it: an
    agent loop reads it as an answer, not as a turn without one."""
    response = chat_to_responses({"choices": [{"message": {"role": "assistant", "content": None}}]})
    assert [i["type"] for i in response["output"]] == ["message"] and "usage" not in response and output_text(response) == ""


def test_a_responses_request_becomes_a_chat_request() -> None:
    request = {
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "2+2?"}]},
            {"type": "function_call", "call_id": "c1", "name": "calc", "arguments": '{"e": "2+2"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "4"},
        ],
        "tools": [{"type": "function", "name": "calc", "parameters": {"type": "object"}}],
        "max_output_tokens": 9,
        "temperature": 0.1,
    }
    chat = responses_request_to_chat(request)
    assert chat["messages"][0] == {"role": "system", "content": "Be brief."}
    assert chat["messages"][1] == {"role": "user", "content": [{"type": "text", "text": "2+2?"}]}
    assert chat["messages"][2]["tool_calls"][0]["function"] == {"name": "calc", "arguments": '{"e": "2+2"}'}
    assert chat["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "4"}
    assert chat["tools"] == [{"type": "function", "function": {"name": "calc", "parameters": {"type": "object"}}}]
    assert (chat["max_tokens"], chat["temperature"]) == (9, 0.1)
    assert "input" not in chat and "max_output_tokens" not in chat
    assert responses_request_to_chat({"input": "hi"})["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_a_chat_request_becomes_a_responses_request() -> None:
    request = {
        "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
        "tools": [{"type": "function", "function": {"name": "w", "parameters": {}}}],
        "max_tokens": 5,
    }
    body = chat_request_to_responses(request)
    assert body["input"] == [
        {"type": "message", "role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    assert body["tools"] == [{"type": "function", "name": "w", "parameters": {}}]
    assert body["max_output_tokens"] == 5 and "messages" not in body


def test_strip_reasoning() -> None:
    assert strip_reasoning("<think>a</think>\n 42", "</think>") == "42"
    assert strip_reasoning("x</think>y</think> z", "</think>") == "z"  # up to the last one
    assert strip_reasoning("no marker", "</think>") == "no marker"
    assert strip_reasoning("<think>a</think>b", None) == "<think>a</think>b"


def test_a_chat_answers_token_details_are_carried_over() -> None:
    completion = {
        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4, "prompt_tokens_details": {"cached_tokens": 6},
                  "completion_tokens_details": {"reasoning_tokens": 3}},
    }  # fmt: skip
    usage = chat_to_responses(completion)["usage"]
    assert (usage["input_tokens_details"], usage["output_tokens_details"]) == ({"cached_tokens": 6}, {"reasoning_tokens": 3})


def test_a_malformed_turn_holds_no_text_and_no_calls() -> None:
    """A message whose content is not a list, or an output that is not one, is read as saying
    nothing (OpenEnv's turn parsing raised TypeError on them: the environment was blamed)."""
    for response in ({"output": [{"type": "message", "content": 5}]}, {"output": [{"type": "message", "content": "hi"}, None, 1]}, {"output": "x"}, {"output": {"type": "message"}}):
        assert output_text(response) == "" and output_tool_calls(response) == []
