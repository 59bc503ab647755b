"""The judge client against a local scripted chat-completions server: the request it sends,
retries (503, 429 + Retry-After, timeouts, refused connections), 4xx failing at once,
bounded concurrency, and the API key never leaving the Authorization header."""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import logging
import socket
import time
from typing import Any

import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.scorers.judge import JudgeClient, JudgeConfig, JudgeError
from gym_metrics._util import http as _http

from gym_metrics.testing import Recorded, Reply, ScriptedJudge, Stall

KEY = "sk-test-SECRET-7f3a9"
KEY_ENV = "GYM_METRICS_TEST_JUDGE_KEY"


@pytest.fixture
def delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff delays the client asked for (the sleeps themselves are skipped)."""
    asked: list[float] = []

    async def record(seconds: float) -> None:
        asked.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(_http, "_sleep", record)
    return asked


@pytest.fixture
def key_env(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY_ENV


def config(judge: ScriptedJudge, **overrides: Any) -> JudgeConfig:
    values: dict[str, Any] = {"url": judge.url, "model": "judge-model-x", "backoff_seconds": 0.01, **overrides}
    return JudgeConfig(**values)


async def ask(client: JudgeClient, text: str = "hello judge", **kwargs: Any) -> str:
    try:
        return await client.complete([{"role": "user", "content": text}], **kwargs)
    finally:
        await client.aclose()


async def test_request_shape_and_reply(key_env: str) -> None:
    with ScriptedJudge(["the verdict"]) as judge:
        client = JudgeClient(config(judge, api_key_env=key_env, temperature=0.25, max_tokens=64))
        assert await ask(client, "Rate this: 2+2=4") == "the verdict"
    [request] = judge.requests
    assert request.path == "/v1/chat/completions"
    assert request.header("Authorization") == f"Bearer {KEY}"
    assert request.header("Content-Type") == "application/json"
    assert request.body == {
        "model": "judge-model-x",
        "messages": [{"role": "user", "content": "Rate this: 2+2=4"}],
        "temperature": 0.25,
        "max_tokens": 64,
    }


async def test_defaults_no_key_no_max_tokens_and_per_call_temperature() -> None:
    with ScriptedJudge(["a", "b"]) as judge:
        client = JudgeClient(config(judge))
        await client.complete([{"role": "user", "content": "x"}])
        await ask(client, temperature=0.1, max_tokens=8)
    first, second = judge.requests
    assert first.header("Authorization") is None
    assert first.body["temperature"] == 0.0 and "max_tokens" not in first.body
    assert second.body["temperature"] == 0.1 and second.body["max_tokens"] == 8


async def test_full_endpoint_url_is_used_as_is() -> None:
    with ScriptedJudge(["ok"]) as judge:
        client = JudgeClient(config(judge, url=f"{judge.url}/chat/completions/"))
        assert await ask(client) == "ok"
    assert judge.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("suffix", "path"),
    [
        ("?api-version=2024-02-01", "/v1/chat/completions?api-version=2024-02-01"),
        ("/?api-version=2024-02-01", "/v1/chat/completions?api-version=2024-02-01"),
        ("/chat/completions?api-version=1", "/v1/chat/completions?api-version=1"),
        ("/", "/v1/chat/completions"),
    ],
)
async def test_the_path_is_joined_before_the_query_string(suffix: str, path: str) -> None:
    class QueryJudge(ScriptedJudge):  # routes by path alone; records the query too
        def _reply(self, item: Any, request: Recorded) -> Reply:
            return super()._reply(item, dataclasses.replace(request, path=request.path.split("?")[0]))

    with QueryJudge(["ok"]) as judge:
        client = JudgeClient(config(judge, url=f"{judge.url}{suffix}"))
        assert await ask(client) == "ok"
    assert judge.requests[0].path == path


async def test_503_then_success_is_retried(delays: list[float]) -> None:
    with ScriptedJudge([Reply(503, "overloaded"), Reply(502, "bad gateway"), "fine"]) as judge:
        assert await ask(JudgeClient(config(judge, backoff_seconds=1.0))) == "fine"
    assert len(judge.requests) == 3
    # exponential with equal jitter: attempt k waits between base*2^k/2 and base*2^k
    assert len(delays) == 2
    assert 0.5 <= delays[0] <= 1.0 and 1.0 <= delays[1] <= 2.0


async def test_429_honours_retry_after_seconds_and_http_date(delays: list[float]) -> None:
    soon = email.utils.formatdate(time.time() + 3, usegmt=True)
    script = [
        Reply(429, "slow down", {"Retry-After": "2"}),
        Reply(429, "slow down", {"Retry-After": soon}),
        "done",
    ]
    with ScriptedJudge(script) as judge:
        assert await ask(JudgeClient(config(judge))) == "done"
    assert len(judge.requests) == 3
    assert delays[0] == 2.0
    assert 1.0 <= delays[1] <= 3.0  # an HTTP date, a second or two ahead


async def test_retry_after_is_capped(delays: list[float]) -> None:
    with ScriptedJudge([Reply(429, "", {"Retry-After": "3600"}), "ok"]) as judge:
        assert await ask(JudgeClient(config(judge, max_backoff_seconds=5))) == "ok"
    assert delays == [5.0]


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_other_4xx_fail_at_once(status: int, delays: list[float]) -> None:
    with ScriptedJudge([Reply(status, '{"error": "bad request"}'), "never sent"]) as judge:
        with pytest.raises(JudgeError, match=f"HTTP {status}") as info:
            await ask(JudgeClient(config(judge)))
    assert len(judge.requests) == 1 and delays == []
    assert info.value.status == status and not info.value.retryable


async def test_408_is_retried(delays: list[float]) -> None:
    with ScriptedJudge([Reply(408, "request timeout"), "ok"]) as judge:
        assert await ask(JudgeClient(config(judge))) == "ok"
    assert len(delays) == 1


async def test_gives_up_after_max_retries(delays: list[float]) -> None:
    with ScriptedJudge([Reply(500, "boom")] * 5) as judge:
        with pytest.raises(JudgeError, match=r"HTTP 500: boom \(gave up after 3 attempts\)"):
            await ask(JudgeClient(config(judge, max_retries=2)))
    assert len(judge.requests) == 3 and len(delays) == 2
    assert judge.remaining == 2


async def test_timeout_is_retried_then_reported(delays: list[float]) -> None:
    with ScriptedJudge([Stall(1.0), "after the stall"]) as judge:
        assert await ask(JudgeClient(config(judge, timeout_seconds=0.2))) == "after the stall"
    with ScriptedJudge([Stall(1.0)]) as judge:
        with pytest.raises(JudgeError, match="timed out after 0.2 s"):
            await ask(JudgeClient(config(judge, timeout_seconds=0.2, max_retries=0)))


async def test_connection_refused_is_retried_then_reported(delays: list[float]) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = JudgeClient(JudgeConfig(url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=2, backoff_seconds=0.01))
    with pytest.raises(JudgeError, match="cannot reach the judge.*gave up after 3 attempts"):
        await ask(client)
    assert len(delays) == 2


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"choices": []}', b'{"choices": [{"message": {"content": null}}]}', b"[1, 2]"],
)
async def test_a_200_that_is_not_a_chat_completion_fails_without_retry(body: bytes, delays: list[float]) -> None:
    with ScriptedJudge([Reply(200, body)]) as judge:
        with pytest.raises(JudgeError, match="not a chat completion|no text content"):
            await ask(JudgeClient(config(judge)))
    assert delays == []


async def test_content_parts_are_joined() -> None:
    parts = b'{"choices": [{"message": {"content": [{"type": "text", "text": "Score: "}, {"type": "text", "text": "4"}]}}]}'
    with ScriptedJudge([Reply(200, parts)]) as judge:
        assert await ask(JudgeClient(config(judge))) == "Score: 4"


async def test_concurrency_is_bounded() -> None:
    with ScriptedJudge([Stall(0.15)] * 8) as judge:
        client = JudgeClient(config(judge, max_concurrency=3))
        try:
            replies = await asyncio.gather(*(client.complete([{"role": "user", "content": str(i)}]) for i in range(8)))
        finally:
            await client.aclose()
    assert replies == ["stalled"] * 8
    assert judge.max_in_flight == 3


async def test_missing_key_variable_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GYM_METRICS_NO_SUCH_KEY", raising=False)
    with pytest.raises(InvalidInputError, match="GYM_METRICS_NO_SUCH_KEY is not set") as info:
        JudgeClient(JudgeConfig(url="http://127.0.0.1:9/v1", model="m", api_key_env="GYM_METRICS_NO_SUCH_KEY"))
    assert info.value.violations[0].field == "config.api_key_env"


async def test_the_key_never_appears_in_errors_logs_or_reprs(
    key_env: str, delays: list[float], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"invalid token: Bearer {KEY}"  # a server that echoes the credential back
    with ScriptedJudge([Reply(503, echo), Reply(401, echo)]) as judge:
        client = JudgeClient(config(judge, api_key_env=key_env))
        with pytest.raises(JudgeError) as info:
            await ask(client)
    assert judge.requests[0].header("Authorization") == f"Bearer {KEY}"  # it was sent...
    message = str(info.value)
    assert "HTTP 401" in message and "***" in message
    texts = [message, repr(client), repr(client.config), client.config.model_dump_json(), caplog.text]
    texts += [r.getMessage() for r in caplog.records]
    assert any("HTTP 503" in t for t in texts)  # the retry was logged...
    for text in texts:
        assert KEY not in text  # ...and the key is nowhere


async def test_a_client_survives_a_new_event_loop() -> None:
    """evaluate() may run a metric under asyncio.run twice: pooled connections are per loop."""
    with ScriptedJudge(["one", "two"]) as judge:
        client = JudgeClient(config(judge))

        def run() -> str:
            return asyncio.run(client.complete([{"role": "user", "content": "x"}]))

        first = await asyncio.to_thread(run)
        second = await asyncio.to_thread(run)
        await client.aclose()
    assert (first, second) == ("one", "two")


def test_a_scripted_servers_own_error_is_a_500_naming_it_and_an_unentered_one_closes() -> None:
    """A test's script that raised closed the connection unanswered ("cannot reach the model"),
    and leaving a server never entered hung for good."""
    import http.client

    from gym_metrics.testing import ScriptedJudge

    def broken(prompt: str) -> str:
        raise KeyError("no such case in the script")

    with ScriptedJudge([], default=broken) as judge:  # type: ignore[arg-type]
        conn = http.client.HTTPConnection("127.0.0.1", judge.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", body=b'{"messages": [{"role": "user", "content": "q"}]}')
        answer = conn.getresponse()
        assert answer.status == 500 and "scripted server error: KeyError" in answer.read().decode()
        conn.close()
        assert [type(e) for e in judge.errors] == [KeyError]
    ScriptedJudge([]).__exit__(None, None, None)  # never entered: returns
