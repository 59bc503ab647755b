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


async def test_request_posts_json_anywhere_and_answers_as_aiohttp() -> None:
    """`server_utils.request` (critpt's and tavily_search's outbound calls): a JSON body as
    orjson's bytes with its content type, the caller's headers, aiohttp's own response (read in
    `async with` or not), every status the caller's to read."""
    from gym_metrics.nemo_gym._request import close_request_session
    from gym_metrics.nemo_gym.server_utils import request

    with ScriptedChatServer([Reply(200, '{"score": 0.75}', {"Content-Type": "application/json"}), Reply(429, "slow down")]) as api:
        url = f"{api.url}/responses"  # (a path the scripted server answers)
        answer = await request(method="POST", url=url, json={"answer": "x"}, headers={"x-api-key": "k"})
        assert (answer.ok, await answer.json()) == (True, {"score": 0.75})
        async with await request("POST", url, json={"answer": "y"}) as limited:
            assert (limited.status, await limited.text()) == (429, "slow down")
        await close_request_session()
    first, second = api.requests
    assert (first.path, first.body, first.header("x-api-key"), first.header("content-type")) == ("/v1/responses", {"answer": "x"}, "k", "application/json")
    assert second.body == {"answer": "y"} and len(api.requests) == 2  # an error status is not retried


async def test_request_to_a_dead_endpoint_stops_after_its_attempts() -> None:
    """NeMo Gym retries a failed connection forever unless told; here at most MAX_NUM_TRIES
    attempts (or `_max_connection_retries`), then aiohttp's error."""
    import time

    import aiohttp

    from gym_metrics.nemo_gym._request import RETRY_DELAY_S, close_request_session
    from gym_metrics.nemo_gym.server_utils import MAX_NUM_TRIES, request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    for retries, attempts in ((None, MAX_NUM_TRIES), (0, 1), (2, 2)):
        started = time.monotonic()
        with pytest.raises(aiohttp.ClientConnectionError):
            await request("GET", f"http://127.0.0.1:{port}/", _max_connection_retries=retries)
        waited = time.monotonic() - started
        assert (attempts - 1) * RETRY_DELAY_S <= waited < attempts * RETRY_DELAY_S + 5, (retries, waited)
    await close_request_session()


async def test_get_server_url_is_the_url_a_server_was_given_by() -> None:
    from gym_metrics.nemo_gym.server_utils import get_server_url

    ServerClient({"judge_model": "http://127.0.0.1:8000/", "target": _target("http://127.0.0.1:8001/v1", "chat")})
    assert (get_server_url("judge_model"), get_server_url("target")) == ("http://127.0.0.1:8000", "http://127.0.0.1:8001")
    with pytest.raises(InvalidInputError, match="serve --server nobody=URL"):
        get_server_url("nobody")


def test_rollout_path_prefixes_are_nemo_gyms() -> None:
    """The path NeMo Gym's model server reads a rollout's identity from (rollout_correlation parses it)."""
    from gym_metrics.nemo_gym.rollout_correlation import RolloutContextMiddleware
    from gym_metrics.nemo_gym.server_utils import apply_rollout_prefix, rollout_path_prefix

    assert rollout_path_prefix(None) == "" and apply_rollout_prefix("http://m:1/", None) == "http://m:1/"
    url = apply_rollout_prefix("http://m:1/", "r-1", token_capture=True) + "/v1/responses"
    assert url == "http://m:1/ng-rollout/r-1/training-token-capture/v1/responses"
    found = RolloutContextMiddleware._path.match(rollout_path_prefix("r-1") + "/v1/responses")
    assert found is not None and (found.group("rollout_id"), found.group("rest")) == ("r-1", "/v1/responses")


def test_a_served_config_gives_its_servers_addresses_as_nemo_gyms_launcher_does() -> None:
    """xstest waits for its judge (`poll_for_status`) and probes it at the host and port of its
    block (`global_config_dict`, `_build_server_base_url`), as NeMo Gym's launcher fills them in."""
    from gym_metrics.nemo_gym import load_config_server
    from gym_metrics.nemo_gym.global_config import get_first_server_config_dict

    config = Path(__file__).parent / "envs" / "echo_env" / "configs" / "echo_env.yaml"
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        dead = sock.getsockname()[1]
    with ScriptedChatServer(default="yes") as judge:
        base = judge.url.removesuffix("/v1")
        server = load_config_server(config, servers={"judge_model": base, "gone": f"http://127.0.0.1:{dead}"})
        client = server.server_client
        block = get_first_server_config_dict(client.global_config_dict, "judge_model")
        assert client._build_server_base_url(block) == base
        assert [client.poll_for_status(n) for n in ("judge_model", "gone", "unknown")] == ["success", "connection_error", "connection_error"]


class _AiohttpLikeAnswer:
    """What environments' own tests hand raise_for_status: an aiohttp ClientResponse stand-in
    with `content.read()` and a `raise_for_status` of its own (no url, no read())."""

    ok, status = False, 429

    def __init__(self, body: bytes) -> None:
        class _Content:
            async def read(self) -> bytes:
                return body

        self.content = _Content()

    def raise_for_status(self) -> None:
        from aiohttp import RequestInfo
        from multidict import CIMultiDict, CIMultiDictProxy
        from yarl import URL

        info = RequestInfo(URL("http://judge/v1/responses"), "POST", CIMultiDictProxy(CIMultiDict()), URL("http://judge/v1/responses"))
        raise ServerResponseError(info, (), status=self.status, message="Too Many Requests")


async def test_raise_for_status_raises_the_response_s_own_error_with_its_content() -> None:
    with pytest.raises(ServerResponseError) as caught:
        await raise_for_status(_AiohttpLikeAnswer(b'{"error": "rate limit"}'))  # type: ignore[arg-type]
    assert caught.value.status == 429 and caught.value.message == "Too Many Requests"
    assert caught.value.response_content == b'{"error": "rate limit"}'
    with pytest.raises(ServerResponseError) as given:
        await raise_for_status(_AiohttpLikeAnswer(b"read"), content=b"given")  # type: ignore[arg-type]
    assert given.value.response_content == b"given"
