"""A key an endpoint sends back in another form than it was sent stays masked: spelled with
JSON `\\u` escapes in a 2xx answer (remote scorer, judge, model target), base64 (alone or as
"Bearer <key>"), percent-encoded or `\\u`-escaped in an error body, and in a header a library
logs at `--log-level debug`. Real loopback servers (the scripted ones) and a real CLI process."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

from gym_metrics._util.masking import key_forms, scrub
from gym_metrics.scorers import RowError, get_scorer
from gym_metrics.scorers.judge._client import JudgeClient
from gym_metrics.scorers.judge._config import JudgeConfig
from gym_metrics.targets import GenerationError, ModelTarget, ModelTargetConfig
from gym_metrics.testing import Reply, ScriptedJudge

pytestmark = pytest.mark.timeout(60)

KEY = "sk-Secr3t+Key/Value=0123456789"
KEY_ENV = "GM_TEST_FORMS_KEY"
JSON = {"Content-Type": "application/json"}
FAST = {"backoff_seconds": 0.001, "max_backoff_seconds": 0.01, "max_retries": 0, "api_key_env": KEY_ENV}


@pytest.fixture(autouse=True)
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def u_escaped(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" for c in text)


def decodings(text: str) -> list[str]:
    """`text`, with `\\u` escapes and percent-escapes decoded, and every base64 run in it
    decoded at each of its four alignments (standard and URL alphabets)."""
    found = [text, json.loads(json.dumps(text).replace("\\\\u", "\\u")), unquote(text)]
    for run in re.findall(r"[A-Za-z0-9+/_-]{8,}", text):
        for start in range(4):
            chunk = run[start:][: (len(run) - start) // 4 * 4]
            found.append(base64.b64decode(chunk.replace("-", "+").replace("_", "/")).decode("latin-1"))
    return found


def leaks(text: str) -> list[str]:
    """Pieces of the key (8 characters or more) that `text` spells in any of its decodings."""
    return [KEY[i : i + 8] for seen in decodings(text) for i in range(len(KEY) - 7) if KEY[i : i + 8] in seen]


def test_every_form_of_the_key_is_masked() -> None:
    bearer = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    for text in (
        f"bad credentials {bearer}",
        f"bad credentials {base64.b64encode(KEY.encode()).decode()}",
        f"bad credentials {base64.urlsafe_b64encode(f'user:{KEY}'.encode()).decode()}",
        f"bad credentials {quote(KEY, safe='')}",
        "bad credentials " + re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(KEY, safe="")),
        f'{{"error": "bad credentials {u_escaped(KEY)}"}}',
    ):
        masked = scrub(text, KEY)
        assert "***" in masked and leaks(masked) == [] and u_escaped(KEY)[:30] not in masked, (text, masked)
    assert scrub("a plain answer, no key", KEY) == "a plain answer, no key"
    assert all(len(form) >= 8 for form in key_forms(KEY))


def echoing_in_u_escapes(body: dict[str, object]) -> str:
    """`body` as JSON whose strings "KEY" are written as the key in `\\u` escapes."""
    return json.dumps(body).replace('"KEY"', f'"{u_escaped(KEY)}"')


@pytest.mark.parametrize("lean", [False, True], ids=["httpx", "lean"])
async def test_a_model_answer_spelling_the_key_in_u_escapes_is_masked(lean: bool) -> None:
    answer = echoing_in_u_escapes({"choices": [{"message": {"role": "assistant", "content": "KEY"}}]})
    with ScriptedJudge([Reply(200, answer, JSON)]) as server:
        target = ModelTarget(ModelTargetConfig(url=server.url, model="m", **FAST), lean_http=lean)  # type: ignore[arg-type]
        try:
            generation = await target.generate({"input": "hi"})
        finally:
            await target.aclose()
    assert generation.text == "***" and leaks(repr(generation)) == []


async def test_a_judge_answer_spelling_the_key_in_u_escapes_is_masked() -> None:
    answer = echoing_in_u_escapes({"choices": [{"message": {"role": "assistant", "content": "KEY"}}]})
    with ScriptedJudge([Reply(200, answer, JSON)]) as server:
        judge = JudgeClient(JudgeConfig(url=server.url, model="j", **FAST))  # type: ignore[arg-type]
        try:
            said = await judge.complete([{"role": "user", "content": "hi"}])
        finally:
            await judge.aclose()
    assert said == "***"


def remote(url: str) -> dict[str, object]:
    return {
        "type": "remote", "url": url, "body": {"q": "{{ item.q }}"}, **FAST,
        "scores": [{"name": "accuracy", "parser": {"type": "json", "json_path": "$.score"}}],
    }  # fmt: skip


async def test_a_remote_score_or_error_in_another_form_of_the_key_is_masked() -> None:
    bearer = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    answers = [
        Reply(200, echoing_in_u_escapes({"score": "KEY"}), JSON),
        Reply(401, json.dumps({"error": f"bad credentials {bearer}"}), JSON),
        Reply(401, f"bad credentials {quote(KEY, safe='')}"),
        Reply(401, f'{{"error": "bad credentials {u_escaped(KEY)}"}}', JSON),
    ]
    with ScriptedJudge(answers) as server:
        metric = get_scorer("remote", remote(f"{server.url}/chat/completions"))
        try:
            for _ in answers:
                with pytest.raises(RowError) as bad:
                    await metric.score({"q": "2+2?"})
                assert leaks(str(bad.value)) == [] and "***" in str(bad.value), str(bad.value)
        finally:
            await metric.aclose()


async def test_a_model_error_in_base64_shows_none_of_the_key() -> None:
    bearer = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    with ScriptedJudge([Reply(401, f"invalid token {bearer}")]) as server:
        target = ModelTarget(ModelTargetConfig(url=server.url, model="m", **FAST), lean_http=True)  # type: ignore[arg-type]
        try:
            with pytest.raises(GenerationError, match="HTTP 401") as failed:
                await target.generate({"input": "hi"})
        finally:
            await target.aclose()
    assert leaks(str(failed.value)) == [] and "***" in str(failed.value)


def test_debug_logs_never_show_a_key_a_remote_sends_back_in_a_header(tmp_path: Path) -> None:
    """httpcore logs answer headers at debug; a 401 that quotes the request's Authorization."""
    challenge = {"WWW-Authenticate": f'Bearer error="invalid_token", received="Bearer {KEY}"'}
    with ScriptedJudge([Reply(401, "no", challenge)]) as server:
        (tmp_path / "cfg.json").write_text(json.dumps({k: v for k, v in remote(f"{server.url}/chat/completions").items() if k != "type"}))
        (tmp_path / "rows.jsonl").write_text('{"q": "a"}\n')
        run = subprocess.run(
            [sys.executable, "-m", "gym_metrics.cli", "--log-level", "debug", "evaluate", "--scorer", "remote",
             "--scorer-config", str(tmp_path / "cfg.json"), "--input", str(tmp_path / "rows.jsonl"), "-o", str(tmp_path / "out.json")],
            capture_output=True, text=True, timeout=60, env={**os.environ, KEY_ENV: KEY},
        )  # fmt: skip
    logged = run.stdout + run.stderr
    assert "receive_response_headers" in logged and "WWW-Authenticate" in logged, logged[-2000:]  # httpcore did log them
    assert leaks(logged) == [] and 'received="Bearer ***"' in logged


def test_a_urls_credentials_are_masked_up_to_the_authoritys_last_at() -> None:
    """A password holding `@` left its tail shown (`http://***@RETpw@host`)."""
    from gym_metrics._util.masking import url_password, without_url_credentials

    assert without_url_credentials("API request to http://alice:S3C@RETpw@127.0.0.1:9/api?x=a@b failed") == \
        "API request to http://***@127.0.0.1:9/api?x=a@b failed"  # fmt: skip
    assert without_url_credentials("see https://host/p@q and s3://b@u/k") == "see https://host/p@q and s3://***@u/k"
    assert url_password("http://alice:S3C%40RET@h:1/") == "S3C@RET" and url_password("http://h/") is None
