"""A judge or remote URL with `user:password@`: the password reaches neither a log line (httpx
logs each request's URL, userinfo included, at debug), nor a repr, nor an error message."""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Iterator

import pytest

from gym_metrics._util.masking import MaskingFilter
from gym_metrics.scorers import get_scorer
from gym_metrics.scorers.judge import JudgeClient, JudgeConfig, JudgeError
from gym_metrics.testing import Reply, ScriptedJudge

PASSWORD = "Hunter2-url-secret-77"


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://judgeuser:{PASSWORD}@")


@pytest.fixture
def cli_log() -> Iterator[io.StringIO]:
    """Every record at debug through a handler filtered as the CLI's are."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(MaskingFilter())
    root, httpx_log = logging.getLogger(), logging.getLogger("httpx")
    old = root.level, httpx_log.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    httpx_log.setLevel(logging.DEBUG)  # as `--log-level debug` (an earlier CLI test may have quieted it)
    try:
        yield out
    finally:
        root.removeHandler(handler)
        root.setLevel(old[0])
        httpx_log.setLevel(old[1])


async def test_a_judge_urls_password_stays_out_of_logs_reprs_and_errors(cli_log: io.StringIO) -> None:
    basic = base64.b64encode(f"judgeuser:{PASSWORD}".encode()).decode()
    with ScriptedJudge(["fine", Reply(401, f"bad credentials: Basic {basic} for judgeuser:{PASSWORD}")]) as judge:
        client = JudgeClient(JudgeConfig(url=with_credentials(judge.url), model="m", max_retries=0))
        try:
            assert await client.complete([{"role": "user", "content": "hi"}]) == "fine"
            with pytest.raises(JudgeError) as info:
                await client.complete([{"role": "user", "content": "hi"}])
        finally:
            await client.aclose()
        scorer = get_scorer("answer_accuracy", {"url": with_credentials(judge.url), "model": "m"})
        remote = get_scorer("remote", {"type": "remote", "url": with_credentials(judge.url) + "/chat/completions",
                                       "body": {"q": "{{ item.q }}"},
                                       "scores": [{"name": "s", "parser": {"type": "json", "json_path": "$.s"}}]})
    assert judge.requests[0].header("Authorization") == f"Basic {basic}"  # it was sent...
    logged = cli_log.getvalue()
    assert "HTTP Request: POST http://***@127.0.0.1:" in logged  # ...httpx logged the URL...
    texts = [logged, str(info.value), repr(client), repr(scorer), repr(remote)]
    assert "HTTP 401" in str(info.value)
    for text in texts:
        assert PASSWORD not in text and basic not in text  # ...and the password is nowhere
    assert "judge=JudgeClient(endpoint='http://***@127.0.0.1:" in repr(scorer)
    assert "url='http://***@127.0.0.1:" in repr(remote)
