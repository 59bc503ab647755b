"""`server_client` of ported environments: a model server by URL (calls pass through, every
status answered, as under NeMo Gym) or by model target (gym-metrics' target client: model name,
key, api conversion), against scripted loopback servers."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._util.http import HttpClientConfig, HttpError
from gym_metrics.errors import InvalidInputError
from gym_metrics.nemo_gym.openai_utils import (
    NeMoGymChatCompletion,
    NeMoGymResponse,
    NeMoGymResponseCreateParamsNonStreaming,
)
from gym_metrics.nemo_gym.server_utils import ServerClient, ServerResponseError, get_response_json, raise_for_status
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import Reply, ScriptedChatServer

PARAMS = NeMoGymResponseCreateParamsNonStreaming(input=[{"role": "user", "content": "Is 2+2 4?"}], temperature=0.0)


async def test_a_url_server_gets_the_set_fields_and_its_answer_is_read() -> None:
    with ScriptedChatServer(default="yes") as judge:
        client = ServerClient({"judge": judge.url.removesuffix("/v1")})
        try:
            answer = await client.post(server_name="judge", url_path="/v1/responses", json=PARAMS)
            await raise_for_status(answer)
            parsed = NeMoGymResponse.model_validate(await get_response_json(answer))
        finally:
            await client.aclose()
    assert parsed.output_text == "yes"
    [seen] = judge.requests
    assert seen.path == "/v1/responses"
    assert seen.body == {"input": [{"role": "user", "content": "Is 2+2 4?"}], "temperature": 0.0}  # set fields only


async def test_a_url_server_error_status_is_the_environments_to_read() -> None:
    with ScriptedChatServer([Reply(503, "overloaded"), "late"]) as judge:
        client = ServerClient({"judge": judge.url.removesuffix("/v1")})
        try:
            answer = await client.post(server_name="judge", url_path="/v1/responses", json=PARAMS)
        finally:
            await client.aclose()
    assert (answer.status, answer.ok, len(judge.requests)) == (503, False, 1)  # not retried here
    with pytest.raises(ServerResponseError) as caught:
        await raise_for_status(answer)
    assert caught.value.status == 503 and caught.value.response_content == b"overloaded"


async def test_an_unreachable_server_is_retried_then_raised() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = HttpClientConfig(url=f"http://127.0.0.1:{port}", max_retries=1, backoff_seconds=0.0)
    client = ServerClient({"judge": config})
    with pytest.raises(HttpError, match="cannot reach the model server 'judge'.*after 2 attempts"):
        await client.post(server_name="judge", url_path="/v1/responses", json=PARAMS)
    await client.aclose()


async def test_an_unknown_server_name_says_how_to_give_it() -> None:
    client = ServerClient({"judge": "http://127.0.0.1:9"})
    with pytest.raises(InvalidInputError) as caught:
        await client.post(server_name="policy_model", url_path="/v1/responses", json=PARAMS)
    assert "serve --server policy_model=URL" in str(caught.value.violations[0])


def _target(url: str, api: str, **more: Any) -> ModelTargetConfig:
    return ModelTargetConfig(url=url, model="judge-7b", api=api, max_retries=0, **more)  # type: ignore[arg-type]


async def test_a_chat_target_answers_a_responses_call_in_responses_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """Typed as NeMo Gym reads it: the request's tools and tool choice are in the answer."""
    monkeypatch.setenv("JUDGE_KEY", "sk-test-0123456789abcdef")
    tool = {"type": "function", "name": "add", "parameters": {"type": "object"}, "strict": False}
    params = PARAMS.model_copy(update={"tools": [tool], "tool_choice": "required"})
    with ScriptedChatServer(default="[[A>B]]") as judge:
        client = ServerClient({"judge": _target(judge.url, "chat", api_key_env="JUDGE_KEY")})
        try:
            answer = await client.post(server_name="judge", url_path="/v1/responses", json=params.model_dump(exclude_unset=True))
            parsed = NeMoGymResponse.model_validate(await get_response_json(answer))
        finally:
            await client.aclose()
    assert answer.status == 200 and parsed.output_text == "[[A>B]]"
    assert [t.model_dump(exclude_none=True) for t in parsed.tools] == [tool] and parsed.tool_choice == "required"
    [seen] = judge.requests
    assert seen.path == "/v1/chat/completions"  # converted for the chat-only endpoint
    assert seen.body["model"] == "judge-7b"
    assert seen.body["messages"] == [{"role": "user", "content": "Is 2+2 4?"}]
    assert seen.body["tools"] == [{"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}}]
    assert seen.header("Authorization") == "Bearer sk-test-0123456789abcdef"


async def test_a_chat_call_to_a_chat_target_is_answered_as_chat() -> None:
    with ScriptedChatServer(default="4") as judge:
        client = ServerClient({"judge": _target(judge.url, "chat")})
        try:
            body = {"messages": [{"role": "user", "content": "2+2?"}], "model": "ignored"}
            answer = await client.post(server_name="judge", url_path="/v1/chat/completions", json=body)
            parsed = NeMoGymChatCompletion.model_validate(await answer.json())
            wrong_api = ServerClient({"judge": _target(judge.url, "responses")})
            refused = await wrong_api.post(server_name="judge", url_path="/v1/chat/completions", json=body)
            other = await client.post(server_name="judge", url_path="/verify", json=body)
        finally:
            await client.aclose()
    assert parsed.choices[0].message.content == "4"
    assert judge.requests[0].body["model"] == "judge-7b"
    assert refused.status == 400 and "api: chat" in json.loads(await refused.read())["error"]["message"]
    assert other.status == 404 and len(judge.requests) == 1


async def test_a_target_error_status_is_answered_and_the_key_stays_out(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("JUDGE_KEY", key)
    with ScriptedChatServer([Reply(500, f"boom, key {key}")]) as judge:
        client = ServerClient({"judge": _target(judge.url, "chat", api_key_env="JUDGE_KEY")})
        try:
            answer = await client.post(server_name="judge", url_path="/v1/responses", json=PARAMS)
        finally:
            await client.aclose()
    assert answer.status == 500
    text = await answer.text()
    assert "boom" in text and key not in text


def test_serve_refuses_a_bad_server_flag(tmp_path: Path) -> None:
    from gym_metrics.cli._serve import _model_server

    agent = tmp_path / "agent.json"
    agent.write_text(json.dumps({"type": "agent", "url": "http://127.0.0.1:9/run", "body": {}, "response_path": "$.a"}))
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"url": "http://127.0.0.1:9/v1", "model": "m", "api": "chat"}))
    with pytest.raises(InvalidInputError, match="bad --server") as caught:
        _model_server("judge", "127.0.0.1:9")
    assert caught.value.violations[0].field == "--server judge"
    with pytest.raises(InvalidInputError, match="bad --server"):
        _model_server("judge", str(agent))
    name, config = _model_server("judge", str(model))
    assert name == "judge" and isinstance(config, ModelTargetConfig) and config.model == "m"
    assert _model_server("judge", "http://127.0.0.1:9") == ("judge", "http://127.0.0.1:9")
