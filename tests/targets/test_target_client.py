"""Model and agent targets against real loopback servers (the scripted policy): both APIs,
retries, Retry-After, timeouts, a policy that is always down, the concurrency bound,
parameters passed through, and the key kept out of every message. Every fault is bounded:
few retries, small delays."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

import gym_metrics._util.http as http
from gym_metrics.errors import InvalidInputError
from gym_metrics.targets import (
    AgentTarget,
    GenerationError,
    ModelTarget,
    ModelTargetConfig,
    make_target,
    output_tool_calls,
    parse_target,
)
from gym_metrics.testing import PolicyAnswer, Reply, ScriptedChatServer, ScriptedPolicyServer

KEY = "sk-test-secret-4242"
FAST = {"backoff_seconds": 0.01, "max_backoff_seconds": 0.05, "timeout_seconds": 5}


@asynccontextmanager
async def target(server: Any, **config: Any) -> AsyncIterator[Any]:
    client = make_target(parse_target({"url": server.url, "model": "policy", **FAST, **config}))
    try:
        yield client
    finally:
        await client.aclose()


def ask(prompt: str) -> dict[str, Any]:
    return {"input": [{"role": "user", "content": prompt}]}


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_both_apis_give_a_responses_shaped_answer_with_usage(api: str) -> None:
    answer = PolicyAnswer(text="<think>2 and 2</think> 4", tool_calls=[{"name": "calc", "arguments": {"e": "2+2"}}], input_tokens=5, output_tokens=3)
    with ScriptedPolicyServer({"2+2?": answer}) as policy:
        async with target(policy, api=api, system_prompt="Be brief.", reasoning={"end_token": "</think>"}) as client:
            generation = await client.generate(ask("2+2?"))
    assert policy.requests[0].path == ("/v1/chat/completions" if api == "chat" else "/v1/responses")
    sent = policy.requests[0].body
    first = sent["messages" if api == "chat" else "input"][0]
    assert first == {"role": "system", "content": "Be brief."} and sent["model"] == "policy"
    assert generation.text == "<think>2 and 2</think> 4" and generation.answer == "4"
    assert output_tool_calls(generation.response) == [{"name": "calc", "arguments": {"e": "2+2"}, "call_id": "call_0"}]
    assert (generation.usage.input_tokens, generation.usage.output_tokens, generation.usage.total_tokens) == (5, 3, 8)
    usage = generation.response["usage"]
    assert {k: usage[k] for k in ("input_tokens", "output_tokens", "total_tokens")} == {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
    assert set(usage["input_tokens_details"]) == {"cached_tokens"} and set(usage["output_tokens_details"]) == {"reasoning_tokens"}
    assert generation.attempts == 1 and generation.latency_s > 0


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_chat_shaped_request_is_sent_to_either_api(api: str) -> None:
    with ScriptedPolicyServer({"hi": "hello"}) as policy:
        async with target(policy, api=api) as client:
            generation = await client.generate({"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", "function": {"name": "f"}}]})
    assert generation.text == "hello"
    tools = policy.requests[0].body["tools"]
    assert tools == ([{"type": "function", "function": {"name": "f"}}] if api == "chat" else [{"type": "function", "name": "f"}])


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_inference_parameters_and_seed_are_passed_through(api: str) -> None:
    inference = {"temperature": 0.3, "top_p": 0.9, "max_tokens": 16, "seed": 7}
    with ScriptedPolicyServer({"q": "a"}) as policy:
        async with target(policy, api=api, inference=inference) as client:
            await client.generate({**ask("q"), "temperature": 1.0, "max_output_tokens": 99})
        async with target(policy, api=api) as client:  # nothing given: the request's own values stay
            await client.generate({**ask("q"), "temperature": 1.0})
    tokens = "max_tokens" if api == "chat" else "max_output_tokens"
    first, second = policy.requests[0].body, policy.requests[1].body
    assert (first["temperature"], first["top_p"], first[tokens], first["seed"]) == (0.3, 0.9, 16, 7)
    assert second["temperature"] == 1.0 and "seed" not in second and "top_p" not in second


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_503s_are_retried_and_attempts_counted_per_call(api: str) -> None:
    with ScriptedPolicyServer(lambda prompt: prompt.upper(), fail_first=2) as policy:
        async with target(policy, api=api, max_retries=3) as client:
            a, b = await asyncio.wait_for(asyncio.gather(client.generate(ask("x")), client.generate(ask("y"))), 10)
    assert (a.text, b.text) == ("X", "Y")
    assert (a.attempts, b.attempts) == (3, 3)
    assert policy.calls == {"x": 3, "y": 3}


async def test_retry_after_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(http, "_sleep", record)
    with ScriptedPolicyServer({"q": "a"}, fail_first=2, fail_status=429, retry_after="0.25") as policy:
        async with target(policy, max_retries=3, backoff_seconds=5.0, max_backoff_seconds=10.0) as client:
            generation = await asyncio.wait_for(client.generate(ask("q")), 10)
    assert generation.attempts == 3 and delays == [0.25, 0.25]


async def test_a_timeout_is_retried() -> None:
    with ScriptedPolicyServer({"q": "late"}, stall_first=1, stall_s=1.0) as policy:
        async with target(policy, max_retries=2, timeout_seconds=0.2) as client:
            generation = await asyncio.wait_for(client.generate(ask("q")), 10)
    assert generation.text == "late" and generation.attempts == 2 and policy.calls["q"] == 2


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_policy_that_is_always_down_fails_typed_after_max_retries(api: str) -> None:
    with ScriptedPolicyServer({"q": "a"}, fail_first=1000) as policy:
        async with target(policy, api=api, max_retries=2) as client:
            with pytest.raises(GenerationError) as info:
                await asyncio.wait_for(client.generate(ask("q")), 10)
    error = info.value
    assert policy.calls["q"] == 3 and error.attempts == 3 and error.status == 503
    assert "503" in str(error) and "3 attempts" in str(error)
    assert (error.kind, error.row_field) == ("generation", "target")


async def test_an_unreachable_policy_fails_typed() -> None:
    with ScriptedPolicyServer({}) as policy:
        url = policy.url
    config = ModelTargetConfig(url=url, model="m", max_retries=1, **FAST)
    client = ModelTarget(config)
    try:
        with pytest.raises(GenerationError, match="cannot reach the model") as info:
            await asyncio.wait_for(client.generate(ask("q")), 10)
    finally:
        await client.aclose()
    assert info.value.attempts == 2


async def test_a_non_retryable_status_fails_at_once() -> None:
    with ScriptedPolicyServer({}) as policy:  # an unknown prompt is a 400
        async with target(policy, max_retries=3) as client:
            with pytest.raises(GenerationError, match="400") as info:
                await client.generate(ask("unknown"))
    assert info.value.attempts == 1 and policy.calls["unknown"] == 1


async def test_the_concurrency_bound_holds_at_the_server() -> None:
    with ScriptedPolicyServer(lambda prompt: prompt, delay_s=0.05) as policy:
        async with target(policy, concurrency=3) as client:
            done = await asyncio.wait_for(asyncio.gather(*(client.generate(ask(f"p{i}")) for i in range(12))), 20)
    assert [g.text for g in done] == [f"p{i}" for i in range(12)]
    assert 1 <= policy.max_in_flight <= 3


async def test_the_key_is_sent_as_bearer_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICY_KEY", KEY)
    with ScriptedPolicyServer({"q": "a"}) as policy:
        async with target(policy, api_key_env="POLICY_KEY") as client:
            await client.generate(ask("q"))
            shown = [str(client.config), repr(client.config), repr(client), str(client)]
    assert policy.requests[0].header("Authorization") == f"Bearer {KEY}"
    echo = Reply(401, f"invalid key {KEY}")  # a server that echoes the key back
    with ScriptedChatServer([echo]) as server:
        async with target(server, api_key_env="POLICY_KEY") as client:
            with pytest.raises(GenerationError) as info:
                await client.generate(ask("q"))
    shown += [str(info.value), repr(info.value)]
    assert all(KEY not in text for text in shown), shown
    assert "***" in str(info.value)


def test_an_unset_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    with pytest.raises(InvalidInputError, match="NO_SUCH_KEY"):
        make_target(parse_target({"url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "NO_SUCH_KEY"}))


async def test_an_answer_that_is_not_a_completion_fails_typed() -> None:
    with ScriptedChatServer([Reply(200, json.dumps({"nope": 1}))]) as server:
        async with target(server) as client:
            with pytest.raises(GenerationError, match="not a chat answer"):
                await client.generate(ask("q"))


def _agent_reply(body: dict[str, Any]) -> Reply:
    answer = {"result": {"text": f"asked {body['question']}", "calls": [{"name": "lookup", "arguments": {"k": body["question"]}}]}}
    return Reply(200, json.dumps(answer), {"Content-Type": "application/json"})


async def test_an_agent_target_renders_its_body_and_reads_text_and_tool_calls() -> None:
    script: list[Callable[[dict[str, Any]], Reply]] = [_agent_reply]
    with ScriptedChatServer(script) as server:
        config = parse_target(
            {
                "type": "agent",
                "url": f"{server.url}/chat/completions",
                "body": {"question": "{{ item.user_input }}"},
                "response_path": "$.result.text",
                "tool_calls_path": "$.result.calls",
                **FAST,
            }
        )
        client = make_target(config)
        assert isinstance(client, AgentTarget)
        try:
            generation = await client.generate({"user_input": "capital?"})
            with pytest.raises(GenerationError, match="template"):
                await client.generate({"other": 1})  # nothing sent
            with pytest.raises(GenerationError, match="not JSON-serialisable"):
                await client.generate({"user_input": object()})  # nothing sent
        finally:
            await client.aclose()
    assert server.requests[0].body == {"question": "capital?"} and len(server.requests) == 1
    assert generation.text == "asked capital?"
    assert output_tool_calls(generation.response)[0]["arguments"] == {"k": "capital?"}
    assert generation.usage.total_tokens is None


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "httpx"])
async def test_a_responses_answer_with_status_failed_is_a_generation_error_not_a_0(lean: bool) -> None:
    """The model server answered 200 with a Response whose status is "failed" (no output):
    scored, it was a silent 0 reward with no error."""
    from gym_metrics.targets import GenerationError, ModelTarget, ModelTargetConfig
    from gym_metrics.testing import Reply, ScriptedJudge

    failed = {"object": "response", "status": "failed", "output": [], "error": {"code": "server_error", "message": "the engine died"}}
    with ScriptedJudge([Reply(200, json.dumps(failed), {"Content-Type": "application/json"})]) as server:
        client = ModelTarget(ModelTargetConfig(url=server.url, model="m", api="responses", **FAST), lean_http=lean)  # type: ignore[arg-type]
        try:
            with pytest.raises(GenerationError, match="answered status failed: server_error: the engine died"):
                await client.generate(ask("hi"))
        finally:
            await client.aclose()
