"""The chat dialect says what the Responses dialect says, as NeMo Gym 0.7.0's own converter
(`ResponsesConverter`) says it: every request and answer of tests/data/nemo_gym_chat (recorded
by scripts/make_nemo_chat_reference.py) converted by gym-metrics and compared, message for
message. Images and videos are sent, one assistant turn is one message carrying its text,
reasoning and calls, and what chat cannot carry is refused, never dropped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.targets import ChatConversionError, GenerationError, ModelTarget, chat_to_responses, parse_target, responses_request_to_chat
from gym_metrics.targets._convert import with_request_fields

RECORDED = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_chat" / "conversions.json").read_text())


@pytest.mark.parametrize("name", sorted(RECORDED["requests"]))
def test_requests_convert_as_nemo_gym_converts_them(name: str) -> None:
    case = RECORDED["requests"][name]
    if "error" in case:
        with pytest.raises(ChatConversionError) as refused:
            responses_request_to_chat(case["request"])
        words = {"previous_response_id": "previous_response_id", "file id": "file_id", "hosted": "web_search_call", "forced": "required",
                 "message's video": "['video_url'] parts", "message's image": "['image_url'] parts", "without content": "content must be a string",
                 "part of a file": "part 'input_file'", "arguments as an object": "arguments must be a string"}  # fmt: skip
        assert next(w for k, w in words.items() if k in name) in str(refused.value)
        return
    assert responses_request_to_chat(case["request"]) == case["chat"]


def _shown(value: Any) -> Any:
    """NeMo Gym's typed dump without its None fields and its uuid ids (recorded as "<id>")."""
    if isinstance(value, dict):
        return {k: _shown(v) for k, v in value.items() if v is not None and v != "<id>" and k != "logprobs"}
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


@pytest.mark.parametrize("name", sorted(RECORDED["answers"]))
def test_answers_convert_as_nemo_gym_converts_them(name: str) -> None:
    case = RECORDED["answers"][name]
    request = {**RECORDED["answer_request"], "parallel_tool_calls": True}
    ours = with_request_fields(chat_to_responses(case["completion"]), request)
    theirs = _shown(case["response"])
    for item in ours["output"]:
        if item["type"] in ("message", "reasoning"):
            del item["id"]  # ours follow from the completion's id, NeMo Gym's from uuid4
    ours = _shown({k: v for k, v in ours.items() if k != "id"})
    for key in ("output", "status", "incomplete_details", "usage", "model", "tool_choice", "parallel_tool_calls", "temperature", "max_output_tokens",
                "service_tier", "top_logprobs"):  # fmt: skip
        assert ours.get(key) == theirs.get(key), key
    assert [_shown(t) for t in ours["tools"]] == theirs["tools"]


async def test_over_chat_a_turn_of_only_reasoning_ends_the_episode_as_nemo_gym_ends_it() -> None:
    """A chat answer that is all `<think>` becomes a reasoning item and no message: the agent
    loop ends the episode incomplete, with NeMo Gym's termination reason and words."""
    from gym_metrics.collector._generate import make_target  # collect's policy client
    from gym_metrics.collector import run_episode
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

    async def no_tool(name: str, arguments: str) -> tuple[str, bool]:
        raise AssertionError("no tool is called")

    with ScriptedPolicyServer({"think": PolicyAnswer(text="<think>Only thinking.</think>")}) as policy:
        target = make_target(ModelTargetConfig(url=policy.url, model="policy", api="chat"))
        try:
            episode = await run_episode(target, {"input": "think"}, no_tool)
        finally:
            await target.aclose()
    assert [i["type"] for i in episode.response["output"]] == ["reasoning"]
    assert episode.response["status"] == "incomplete" and episode.steps == 1
    metadata = episode.response["metadata"]
    assert metadata["ng_termination_reason"] == "incomplete_reasoning"
    assert metadata["ng_termination_message"].startswith("Ending trajectory: model returned no assistant message or tool calls (reasoning-only")


def test_with_token_ids_the_request_is_what_nemo_gyms_vllm_server_sends() -> None:
    """NeMo Gym's vLLM model server drops a function tool's `strict` (templates that render a
    function's keys put it into the prompt, and the prompt IDs differ) and sends `routed_experts`
    back on the assistant message with the token fields; a request for any other server keeps
    `strict`."""
    tool = {"type": "function", "name": "add", "parameters": {"type": "object"}, "strict": True}
    turn = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}],
            "prompt_token_ids": [1, 2], "generation_token_ids": [3], "generation_log_probs": [-0.5], "routed_experts": [[[0, 1]]]}  # fmt: skip
    request = {"input": [{"role": "user", "content": "2+2?"}, turn, {"role": "user", "content": "and 3+3?"}], "tools": [tool]}
    vllm = responses_request_to_chat(request, token_ids=True)
    assert vllm["tools"] == [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    assert vllm["messages"][1]["routed_experts"] == [[[0, 1]]] and vllm["messages"][1]["generation_token_ids"] == [3]
    chat_shaped = responses_request_to_chat({**request, "tools": [{"type": "function", "function": {"name": "add", "strict": True}}]}, token_ids=True)
    assert chat_shaped["tools"] == [{"type": "function", "function": {"name": "add"}}]
    plain = responses_request_to_chat(request)
    assert plain["tools"][0]["function"]["strict"] is True and "routed_experts" not in plain["messages"][1]


@pytest.mark.parametrize("name", sorted(RECORDED["vllm"]))
def test_metadata_reaches_the_engine_as_nemo_gyms_vllm_server_sends_it(name: str) -> None:
    """A row's `metadata.extra_body` (a seed, stop strings) under the chat body and its
    `metadata.chat_template_kwargs` in it, as NeMo Gym's vLLM model server sends them."""
    case = RECORDED["vllm"][name]
    target = ModelTarget(parse_target({"type": "model", "url": "http://127.0.0.1:9/v1", "model": "m", "api": "chat"}))
    assert target.request_body(case["request"]) == case["body"]


def test_metadata_that_is_not_a_json_object_fails_the_generation() -> None:
    target = ModelTarget(parse_target({"type": "model", "url": "http://127.0.0.1:9/v1", "model": "m", "api": "chat"}))
    for bad in ("{not json", "[1]"):
        with pytest.raises(GenerationError, match="metadata.extra_body is not a JSON object"):
            target.request_body({"input": "hi", "metadata": {"extra_body": bad}})


_USER = {"role": "user", "content": "Hi"}
_TOOL = {"type": "function", "name": "lookup", "parameters": {"type": "object"}}
_CALL = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
REFUSED = {
    "a call's namespace": ({"input": [_USER, {**_CALL, "namespace": "ns"}]}, "function call's namespace"),
    "a message's phase": ({"input": [{"type": "message", "role": "assistant", "content": "x", "phase": "final_answer"}]}, "message's phase"),
    "an assistant image": ({"input": [{"role": "assistant", "content": [{"type": "input_image", "image_url": "https://x/a.png"}]}]}, "assistant content part 'input_image'"),
    "assistant content of a number": ({"input": [{"role": "assistant", "content": 5}]}, "assistant content must be a string or a list of parts, got int"),
    "an unknown role": ({"input": [{"type": "message", "role": "critic", "content": "x"}]}, "unknown message role 'critic'"),
    "an image without a URL": ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": {"url": ""}}]}]}, "input_image needs a non-empty image_url"),
    "image detail original": ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "https://x/a.png", "detail": "original"}]}]}, "image detail 'original'"),
    "a video without a URL": ({"input": [{"role": "user", "content": [{"type": "input_video"}]}]}, "input_video.video needs a non-empty URL"),
    "a file part": ({"input": [{"role": "user", "content": [{"type": "input_file", "file_data": "x", "filename": "a.txt"}]}]}, "content part 'input_file'"),
    "a tool output's image": ({"input": [_USER, _CALL, {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "a"}, {"type": "input_image", "image_url": "https://x/a.png"}]}]}, r"output of call 'c1': parts \['input_image'\]"),
    "a tool output of an object": ({"input": [_USER, _CALL, {"type": "function_call_output", "call_id": "c1", "output": {"text": "a"}}]}, "must be a string or a list of parts, got dict"),
    "a reasoning summary": ({"input": "Hi", "reasoning": {"effort": "low", "summary": "auto"}}, r"reasoning field\(s\) \['summary'\]"),
    "a text format chat lacks": ({"input": "Hi", "text": {"format": {"type": "grammar"}}}, "text format 'grammar'"),
    "a hosted tool choice": ({"input": "Hi", "tools": [_TOOL], "tool_choice": {"type": "web_search_preview"}}, "tool_choice type 'web_search_preview'"),
    "a hosted tool among allowed tools": ({"input": "Hi", "tools": [_TOOL], "tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "mcp", "server_label": "s"}]}}, "tool reference type 'mcp'"),
    "a hosted tool": ({"input": "Hi", "tools": [{"type": "web_search"}]}, "tool type 'web_search'"),
    "a tool message's numeric call id": ({"input": [{"role": "tool", "tool_call_id": 7, "content": "1"}]}, "tool_call_id must be a string, got int"),
    "a deferred tool": ({"input": "Hi", "tools": [{**_TOOL, "defer_loading": True}]}, "function tools with defer_loading"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_what_chat_cannot_carry_is_refused_as_nemo_gym_refuses_it(name: str) -> None:
    """NeMo Gym 0.7.0 refuses each of these too (its converter's NotImplementedError, or its
    request validation for the malformed ones); none is sent with a part dropped."""
    request, words = REFUSED[name]
    with pytest.raises(ChatConversionError, match=words):
        responses_request_to_chat(request)


MALFORMED = {
    "a call without call_id": ({"input": [_USER, {"type": "function_call", "name": "lookup", "arguments": "{}"}]}, "a malformed Responses request: field 'call_id' is missing"),
    "allowed tools without a mode": ({"input": "Hi", "tools": [_TOOL], "tool_choice": {"type": "allowed_tools", "tools": []}}, "a malformed Responses request: field 'mode' is missing"),
    "reasoning as a word": ({"input": "Hi", "reasoning": "high"}, "a malformed Responses request: 'str' object has no attribute"),
    "text as a word": ({"input": "Hi", "text": "json"}, "a malformed Responses request: 'str' object has no attribute"),
    "a tool output of strings": ({"input": [_USER, _CALL, {"type": "function_call_output", "call_id": "c1", "output": ["a"]}]}, "a malformed Responses request: 'str' object has no attribute"),
    "an input item that is a string": ({"input": ["Hi"]}, "an input item must be an object, got str"),
    "input of a number": ({"input": 5}, "a malformed Responses request: 'int' object is not iterable"),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_request_fails_its_row_and_not_the_run(name: str) -> None:
    """A request NeMo Gym's request validation rejects fails that row's generation with the
    reason (it raised KeyError or AttributeError, which the collector takes for a bug and ends
    the run with)."""
    request, words = MALFORMED[name]
    with pytest.raises(ChatConversionError, match=re.escape(words)):
        responses_request_to_chat(request)
    target = ModelTarget(parse_target({"type": "model", "url": "http://127.0.0.1:9/v1", "model": "m", "api": "chat"}))
    with pytest.raises(GenerationError, match="the request cannot go to a chat completions endpoint"):
        target.request_body(request)


def test_chat_shaped_tools_go_as_they_are_and_unset_custom_fields_are_left_out() -> None:
    chat_tool = {"type": "function", "function": {"name": "lookup", "strict": True}}
    assert responses_request_to_chat({"input": "Hi", "tools": [chat_tool]})["tools"] == [chat_tool]
    without_strict = {"type": "function", "function": {"name": "lookup"}}
    assert responses_request_to_chat({"input": "Hi", "tools": [without_strict]}, token_ids=True)["tools"] == [without_strict]
    custom = {"type": "custom", "name": "patch", "description": None, "format": None}
    assert responses_request_to_chat({"input": "Hi", "tools": [custom]})["tools"] == [{"type": "custom", "custom": {"name": "patch"}}]


async def test_an_answer_echoes_the_request_without_what_metadata_extra_body_added() -> None:
    """metadata.extra_body's temperature reaches the engine, but the answer echoes the request's
    (none), as NeMo Gym's vLLM server adds extra_body after its converter; the config's own
    sampling values are echoed."""
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing import ScriptedPolicyServer

    request = {"input": "hi", "metadata": {"extra_body": '{"temperature": 0.9, "top_p": 0.5}'}}
    with ScriptedPolicyServer({"hi": "hello"}) as policy:
        for inference, echoed in (({}, None), ({"top_p": 0.8}, 0.8)):
            target = ModelTarget(ModelTargetConfig.model_validate({"url": policy.url, "model": "policy", "api": "chat", "inference": inference}))
            try:
                response = (await target.generate(request)).response
            finally:
                await target.aclose()
            assert policy.requests[-1].body["temperature"] == 0.9
            assert "temperature" not in response and response.get("top_p") == echoed


def test_a_null_defer_loading_is_echoed_as_false() -> None:
    """NeMo Gym 0.7.0 replays a tool's `defer_loading: null` as false in the answer it makes of a
    chat completion (its request normalisation; found by scripts/fuzz_nemo_chat_dialect.py, seed
    4946: NeMo Gym answered `defer_loading: false`, ours left it out)."""
    request = {"input": "q", "tools": [{"type": "function", "name": "lookup", "parameters": None, "strict": None, "defer_loading": None}]}
    answer = with_request_fields(chat_to_responses({"choices": [{"message": {"role": "assistant", "content": "a"}}]}), request)
    assert answer["tools"] == [{"type": "function", "name": "lookup", "parameters": None, "strict": None, "defer_loading": False}]
