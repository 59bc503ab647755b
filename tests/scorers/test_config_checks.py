"""What used to pass the config and then fail every row opaquely is refused when the config is
read, naming the field and never quoting a secret: a URL that cannot be requested (bad port,
malformed host), a key that cannot go in a header (a newline, non-ASCII). And a remote answer
with an integer Python's json will not read is said to be that, not "not valid JSON"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._util.keys import BoundKey, keys_from
from gym_metrics.cli import main
from gym_metrics.errors import InvalidInputError
from gym_metrics.scorers import RowError, get_scorer
from gym_metrics.scorers.judge import JudgeClient, JudgeConfig, JudgeError
from gym_metrics.testing import Reply, ScriptedJudge

SECRET = "SeCrEtPw-9931"
REMOTE = {"type": "remote", "body": {"q": "{{ item.q }}"}, "scores": [{"name": "score"}]}


def judge(url: str, **more: Any) -> dict[str, Any]:
    return {"url": url, "model": "m", **more}


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:99999/v1", "Port out of range"),
        (f"http://u:{SECRET}@127.0.0.1:99999/v1", "Port out of range"),
        ("http://[::1/v1", "Invalid IPv6 URL"),
        ("http://h:abc/v1", "Port could not be cast"),
        ("http://", "has no host"),
        ("http://exa mple.com/v1", "a space or a control character in its host"),
        ("http://127.0.0.1:0/v1", "port 0"),
    ],
)
@pytest.mark.parametrize("scorer", ["answer_accuracy", "remote", "nemo-agent-toolkit-remote"])
def test_a_url_that_cannot_be_requested_is_a_config_error(url: str, why: str, scorer: str) -> None:
    config = {"answer_accuracy": judge(url), "remote": {**REMOTE, "url": url}}.get(scorer, {"url": url, "evaluator_name": "e"})
    with pytest.raises(InvalidInputError) as info:
        get_scorer(scorer, config)
    [violation] = info.value.violations
    assert violation.field == "config.url" and why in violation.description
    assert SECRET not in str(info.value) + repr(info.value.violations)


def test_a_bad_port_exits_2_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows, config = tmp_path / "rows.jsonl", tmp_path / "judge.json"
    rows.write_text(json.dumps({"user_input": "q", "response": "a", "reference": "a"}) + "\n")
    config.write_text(json.dumps(judge(f"http://u:{SECRET}@127.0.0.1:99999/v1")))
    code = main(["evaluate", "--metric", "answer_accuracy", "--metric-config", str(config), "--input", str(rows), "-o", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and "config.url" in err and "Port out of range" in err and SECRET not in err


@pytest.mark.parametrize(
    ("key", "why"),
    [
        (f"sk-{SECRET}\n", "line break"),
        (f"sk-{SECRET}\r\n", "line break"),
        (f"sk-{SECRET}é", "non-ASCII"),
        (f"sk-{SECRET}\x7f", "control character"),
        (f"sk-{SECRET} ", "whitespace"),
    ],
)
def test_a_key_that_cannot_go_in_a_header_is_a_config_error(key: str, why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GYM_METRICS_TEST_BAD_KEY", key)
    for scorer, config in [("answer_accuracy", judge("http://127.0.0.1:1/v1")), ("remote", {**REMOTE, "url": "http://127.0.0.1:1/s"})]:
        with pytest.raises(InvalidInputError) as info:
            get_scorer(scorer, {**config, "api_key_env": "GYM_METRICS_TEST_BAD_KEY"})
        [violation] = info.value.violations
        assert violation.field == "config.api_key_env" and why in violation.description
        assert "GYM_METRICS_TEST_BAD_KEY" in violation.description
        assert SECRET not in str(info.value) + repr(info.value.violations)
    with keys_from({"JOB_KEY": BoundKey(key)}):  # a job's resolved secret is checked the same way
        with pytest.raises(InvalidInputError, match="JOB_KEY"):
            get_scorer("answer_accuracy", judge("http://127.0.0.1:1/v1", api_key_env="JOB_KEY"))


async def test_a_request_that_cannot_be_written_is_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GYM_METRICS_TEST_GOOD_KEY", "sk-good-key-1234")
    with ScriptedJudge(["never"] * 4) as server:
        client = JudgeClient(JudgeConfig(url=server.url, model="m", api_key_env="GYM_METRICS_TEST_GOOD_KEY", backoff_seconds=0.01))
        client._bound = BoundKey(f"sk-{SECRET}\nInjected: header")  # past the config check: h11 refuses the header
        try:
            with pytest.raises(JudgeError) as info:
                await client.complete([{"role": "user", "content": "hi"}])
        finally:
            await client.aclose()
    assert "LocalProtocolError" in str(info.value) and not info.value.retryable
    assert client.attempts == 1 and server.requests == []


async def test_a_remote_answer_with_a_huge_integer_is_named_as_such() -> None:
    with ScriptedJudge([Reply(200, '{"score": ' + "9" * 5000 + "}", {"Content-Type": "application/json"})]) as server:
        metric = get_scorer("remote", {**REMOTE, "url": f"{server.url}/chat/completions"})
        try:
            with pytest.raises(RowError) as info:
                await metric.score({"q": "x"})
        finally:
            await metric.aclose()
    assert info.value.field == "endpoint"
    assert info.value.reason.startswith("answer holds an integer of more than 4,300 digits (value has 5000 digits)")
