"""The bearer key never leaves through an endpoint that echoes it (issue 23, defect 6): not
through an error snippet cut across the key, a score that fails to parse, a judge reply
quoted in a row error, nor a model answer (`generated.response`). One function masks it
(`gym_metrics._util.http.scrub`), before any cut. Real loopback servers (the scripted ones)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from gym_metrics._util.http import SNIPPET
from gym_metrics.evaluation import evaluate_async
from gym_metrics.scorers import RowError, Scorer, get_scorer
from gym_metrics.scorers.judge import TopicAdherence
from gym_metrics.targets import GenerationError, ModelTarget, ModelTargetConfig
from gym_metrics.testing import Reply, ScriptedJudge

pytestmark = pytest.mark.timeout(60)

KEY = "sk-live-0123456789abcdefghijklmnopqrstuvwxyz"
KEY_ENV = "GM_TEST_ECHOED_KEY"
JSON = {"Content-Type": "application/json"}
FAST = {"backoff_seconds": 0.001, "max_backoff_seconds": 0.01, "max_retries": 0, "api_key_env": KEY_ENV}


@pytest.fixture(autouse=True)
def key_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def leaks(text: str) -> list[str]:
    """The pieces of the key (8 characters or more) found in `text`."""
    return [KEY[i : i + 8] for i in range(len(KEY) - 7) if KEY[i : i + 8] in text]


def across_the_cut() -> str:
    """An error body echoing the key so that character SNIPPET falls inside it."""
    return "x" * (SNIPPET - 10) + KEY + " and more"


@pytest.mark.parametrize("lean", [False, True], ids=["httpx", "lean"])
async def test_a_model_error_echoing_the_key_across_the_cut_shows_none_of_it(lean: bool) -> None:
    with ScriptedJudge([Reply(400, across_the_cut())]) as server:
        target = ModelTarget(ModelTargetConfig(url=server.url, model="m", **FAST), lean_http=lean)  # type: ignore[arg-type]
        try:
            with pytest.raises(GenerationError, match="HTTP 400") as failed:
                await target.generate({"input": "hi"})
        finally:
            await target.aclose()
    assert leaks(str(failed.value)) == [] and "***" in str(failed.value)


@pytest.mark.parametrize("lean", [False, True], ids=["httpx", "lean"])
async def test_a_model_answer_echoing_the_key_is_masked_in_the_generation(lean: bool) -> None:
    with ScriptedJudge([f"Your key is {KEY}, and the answer is 4."]) as server:
        target = ModelTarget(ModelTargetConfig(url=server.url, model="m", **FAST), lean_http=lean)  # type: ignore[arg-type]
        try:
            generation = await target.generate({"input": "hi"})
        finally:
            await target.aclose()
    assert generation.text == "Your key is ***, and the answer is 4."


class Echo(Scorer):
    """Scores 1.0 and says nothing: the generation alone is under test."""

    name = "echo_check"
    score_names = ("ok",)

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        return {"ok": float(KEY not in str(row["response"]))}


async def test_evaluate_keeps_an_echoed_key_out_of_generated_response_and_the_scorer() -> None:
    with ScriptedJudge([f"echo {KEY}"]) as server:
        target = {"type": "model", "url": server.url, "model": "m", **FAST}
        result = await evaluate_async(Echo(), [{"user_input": "hi"}], target=target)
    assert result.row_scores[0]["generated"]["response"] == "echo ***" and result.stats[0].mean == 1.0
    assert leaks(result.to_json().decode()) == []


def remote(url: str) -> dict[str, Any]:
    return {
        "type": "remote", "url": url, "body": {"q": "{{ item.q }}"}, **FAST,
        "scores": [{"name": "accuracy", "parser": {"type": "json", "json_path": "$.score"}}],
    }  # fmt: skip


async def test_a_remote_score_that_is_the_key_is_not_quoted() -> None:
    answers = [Reply(200, json.dumps({"score": KEY}), JSON), Reply(200, json.dumps({"score": {"why": [KEY] * 20}}), JSON)]
    with ScriptedJudge(answers) as server:
        metric = get_scorer("remote", remote(f"{server.url}/chat/completions"))
        try:
            for _ in answers:
                with pytest.raises(RowError, match=r"response\.accuracy") as bad:
                    await metric.score({"q": "2+2?"})
                assert leaks(str(bad.value)) == [] and "***" in str(bad.value)
        finally:
            await metric.aclose()


async def test_a_remote_error_echoing_the_key_across_the_cut_shows_none_of_it() -> None:
    with ScriptedJudge([Reply(400, across_the_cut()), Reply(200, across_the_cut())]) as server:
        metric = get_scorer("remote", remote(f"{server.url}/chat/completions"))
        try:
            for why in ("HTTP 400", "not valid JSON"):
                with pytest.raises(RowError, match=why) as bad:
                    await metric.score({"q": "2+2?"})
                assert leaks(str(bad.value)) == []
        finally:
            await metric.aclose()


async def test_a_judge_reply_echoing_the_key_is_not_quoted_in_the_row_error() -> None:
    config = {"url": "", "model": "j", **FAST, "format_retries": 0}
    with ScriptedJudge([f"I will not grade. Key: {KEY}"]) as judge:
        metric = TopicAdherence({**config, "url": judge.url})
        try:
            with pytest.raises(RowError) as bad:
                await metric.score({"user_input": [{"type": "human", "content": "hi"}, {"type": "ai", "content": "hello"}], "reference_topics": ["greeting"]})
        finally:
            await metric.aclose()
    assert bad.value.field == "judge_reply" and leaks(str(bad.value)) == []
    with ScriptedJudge([Reply(200, "not json " + across_the_cut())]) as judge:
        metric = TopicAdherence({**config, "url": judge.url})
        try:
            with pytest.raises(RowError, match="not a chat completion") as bad:
                await metric.score({"user_input": [{"type": "human", "content": "hi"}], "reference_topics": ["greeting"]})
        finally:
            await metric.aclose()
    assert leaks(str(bad.value)) == []


def test_scrub_masks_before_cutting_and_a_key_cut_by_a_partial_read() -> None:
    from gym_metrics._util.http import scrub

    assert scrub(across_the_cut(), KEY, SNIPPET) == "x" * (SNIPPET - 10) + "*** and mo"
    assert scrub("pre " + KEY[:20], KEY, truncated=True) == "pre ***"  # the read stopped inside the key
    assert scrub("pre " + KEY[:20], KEY) == "pre " + KEY[:20]  # a whole text: a prefix alone is not the key
    assert scrub(json.dumps({"k": "a/b\"c" * 3}), "a/b\"c" * 3) == '{"k": "***"}'  # as JSON escapes it
    assert scrub('{"k": "a\\/bcdef"}', "a/bcdef") == '{"k": "***"}'  # with escaped slashes
    assert scrub("a 12 in 123", "12") == "a 12 in 123"  # keys under 4 characters are left: masking would garble
    assert scrub("abcd", None) == "abcd" and scrub("x" * 500, KEY, 10) == "x" * 10
