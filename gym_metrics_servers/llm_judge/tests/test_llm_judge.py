"""llm_judge: configuration from env vars / a JSON file, verify against a local scripted judge
(in-process and over a real gRPC VerifyStream), and how failures are recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gym_metrics
from gym_metrics.errors import GymMetricsError, InvalidInputError
from gym_metrics.scorers import RowError
from gym_metrics.testing import Reply, ScriptedJudge
from gym_metrics.scorers.judge import AnswerAccuracy
from gym_metrics_servers.llm_judge import JudgeSettings, LlmJudgeServer
from gym_metrics_servers.llm_judge.app import build_row, LlmJudgeVerifyRequest


KEY = "sk-llm-judge-server-77"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("LLM_JUDGE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LLM_JUDGE_TEST_KEY", KEY)


QA = {"user_input": "Capital of France?", "response": "Paris", "reference": "Paris"}


def test_registered_by_its_decorator() -> None:
    assert gym_metrics.resolve_server("llm_judge") is LlmJudgeServer


def test_settings_from_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    assert JudgeSettings.from_env({}) is None
    env = {
        "LLM_JUDGE_METRIC": "answer_accuracy",
        "LLM_JUDGE_URL": "http://127.0.0.1:1/v1",
        "LLM_JUDGE_MODEL": "judge",
        "LLM_JUDGE_API_KEY_ENV": "LLM_JUDGE_TEST_KEY",
        "LLM_JUDGE_TEMPERATURE": "0.2",
        "LLM_JUDGE_MAX_CONCURRENCY": "4",
    }
    settings = JudgeSettings.from_env(env)
    assert settings is not None and settings.metric == "answer_accuracy"
    metric = settings.build()
    assert isinstance(metric, AnswerAccuracy)
    assert metric.config.temperature == 0.2 and metric.config.max_concurrency == 4
    assert KEY not in repr(metric) and KEY not in metric.config.model_dump_json()


def test_settings_from_a_file_with_env_overrides(tmp_path: Path) -> None:
    path = tmp_path / "judge.json"
    path.write_text(json.dumps({"metric": "topic_adherence", "config": {"url": "http://a/v1", "model": "m1", "partial_list": "pad"}}))
    settings = JudgeSettings.from_env({"LLM_JUDGE_CONFIG": str(path), "LLM_JUDGE_MODEL": "m2"})
    assert settings is not None
    metric = settings.build()
    assert metric.name == "topic_adherence"
    assert (metric.config.url, metric.config.model, metric.config.partial_list) == ("http://a/v1", "m2", "pad")


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"LLM_JUDGE_URL": "http://a/v1"}, "no metric configured"),
        ({"LLM_JUDGE_CONFIG": "/no/such/judge.json"}, "cannot read"),
        ({"LLM_JUDGE_METRIC": "answer_accuracy", "LLM_JUDGE_URL": "http://a/v1"}, "invalid config"),
        ({"LLM_JUDGE_METRIC": "answer_accuracy", "LLM_JUDGE_URL": "ftp://judge", "LLM_JUDGE_MODEL": "m"},
         "must start with http"),
        ({"LLM_JUDGE_METRIC": "answer_accuracy", "LLM_JUDGE_URL": "http://a/v1", "LLM_JUDGE_MODEL": "m",
          "LLM_JUDGE_API_KEY_ENV": "LLM_JUDGE_NO_SUCH_KEY"}, "API key not found"),
    ],
)
def test_bad_settings_fail_when_the_server_is_created(env: dict[str, str], match: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(GymMetricsError, match=match):
        LlmJudgeServer()


async def test_unconfigured_server_reports_it_on_verify() -> None:
    env = LlmJudgeServer()  # e.g. `gym-metrics aggregate --env llm_judge` needs no judge
    with pytest.raises(GymMetricsError, match="llm_judge is not configured"):
        await env.verify_dict(QA)


async def test_verify_from_env_config(monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedJudge(["4", "2"]) as judge:
        monkeypatch.setenv("LLM_JUDGE_METRIC", "answer_accuracy")
        monkeypatch.setenv("LLM_JUDGE_URL", judge.url)
        monkeypatch.setenv("LLM_JUDGE_MODEL", "judge-m")
        monkeypatch.setenv("LLM_JUDGE_API_KEY_ENV", "LLM_JUDGE_TEST_KEY")
        env = LlmJudgeServer()
        out = await env.verify_dict({**QA, "agent_ref": {"name": "a"}})
        await env.metric.aclose()
    assert out["reward"] == 0.75 and out["answer_accuracy"] == 0.75 and out["metric"] == "answer_accuracy"
    assert all(r.header("Authorization") == f"Bearer {KEY}" for r in judge.requests)
    assert all(r.body["model"] == "judge-m" for r in judge.requests)


def test_row_takes_text_from_responses_api_objects() -> None:
    body = LlmJudgeVerifyRequest.model_validate(
        {
            "responses_create_params": {"input": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Capital of France?"}]},
            "response": {"output": [{"type": "reasoning"}, {"type": "message", "content": [{"type": "output_text", "text": "Paris."}]}]},
            "reference": "Paris",
        }
    )
    row = build_row(body)
    assert (row["user_input"], row["response"], row["generated_answer"], row["reference"]) == (
        "Capital of France?", "Paris.", "Paris.", "Paris",
    )
    row = build_row(LlmJudgeVerifyRequest.model_validate({"model_output": "plain", "question": "q"}))
    assert row["response"] == "plain" and "user_input" not in row


async def test_topic_adherence_scores_are_response_fields() -> None:
    def respond(body: dict[str, Any]) -> str:
        text = body["messages"][-1]["content"].split("=== Now the real input ===")[-1]
        if "### Topic\n" in text:
            return json.dumps({"refused_to_answer": False})
        if "### Reference topics" in text:
            return json.dumps({"classifications": [True, False]})
        return json.dumps({"topics": ["weather", "stocks"]})

    with ScriptedJudge([respond] * 4) as judge:
        env = LlmJudgeServer(gym_metrics.scorers.get_scorer("topic_adherence", {"url": judge.url, "model": "m"}))
        out = await env.verify_dict(
            {"user_input": [{"type": "human", "content": "weather? stocks?"}, {"type": "ai", "content": "sunny; buy X"}],
             "reference_topics": ["weather"]}
        )
        await env.metric.aclose()
    assert out["reward"] == pytest.approx(out["topic_adherence_f1"])
    assert out["topic_adherence_precision"] == pytest.approx(0.5) and out["topic_adherence_recall"] == pytest.approx(1.0)


async def test_bad_rollout_is_invalid_input_and_judge_failure_is_a_row_error() -> None:
    with ScriptedJudge(["no rating here"] * 5 + [Reply(400, "bad")]) as judge:
        env = LlmJudgeServer(AnswerAccuracy({"url": judge.url, "model": "m"}))
        with pytest.raises(InvalidInputError) as info:
            await env.verify_dict({"user_input": "q", "response": "a"})
        assert info.value.violations[0].field == "body_json.reference"
        with pytest.raises(RowError, match="judge_reply: no rating"):
            await env.verify_dict(QA)
        with pytest.raises(RowError, match="judge: judge returned HTTP 400"):
            await env.verify_dict(QA)
        await env.metric.aclose()


async def test_verify_stream_over_grpc_records_judge_failures_per_rollout() -> None:
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics._transport.server import ServerConfig, start_server

    def respond(body: dict[str, Any]) -> Any:
        text = body["messages"][0]["content"]
        return "???" if "Question: bad" in text else "4"

    with ScriptedJudge([respond] * 8) as judge:
        env = LlmJudgeServer(AnswerAccuracy({"url": judge.url, "model": "m", "rating_attempts": 1}))
        server = await start_server(env, ServerConfig(port=0, log_requests=False))
        try:
            async with ResourcesClient(server.address) as client:
                items = [(0, 0, QA), (1, 0, {**QA, "user_input": "bad"}), (2, 0, {"user_input": "q"})]
                outcomes = [o async for o in client.verify_stream(items)]
        finally:
            await server.stop(0)
            await env.metric.aclose()
    good, failed, invalid = outcomes
    assert good.error_kind is None and good.reward == 1.0 and good.response["answer_accuracy"] == 1.0
    assert failed.error_kind == "verify_failed" and "judge_reply: no rating" in failed.error_message
    assert invalid.error_kind == "invalid_request" and "body_json.response" in invalid.error_message
