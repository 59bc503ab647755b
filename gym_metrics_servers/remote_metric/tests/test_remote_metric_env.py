"""remote_metric: configured from the REMOTE_METRIC_CONFIG file, verify against a loopback
endpoint (in-process and over a real gRPC VerifyStream), and how failures are recorded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import gym_metrics
from gym_metrics.errors import GymMetricsError, InvalidInputError
from gym_metrics.scorers import RowError
from gym_metrics.testing import Reply, ScriptedJudge
from gym_metrics_servers.remote_metric import RemoteMetricServer, load_metric

HERE = Path(__file__).resolve().parent

KEY = "sk-remote-metric-env-9001"
SAMPLE = HERE.parent / "sample_config.json"
ROWS = [json.loads(line) for line in (HERE.parent / "sample_rows.jsonl").read_text().splitlines()]


def ok(data: Any) -> Any:
    return Reply(200, json.dumps(data), {"Content-Type": "application/json"})


@pytest.fixture(autouse=True)
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REMOTE_METRIC_CONFIG", raising=False)
    monkeypatch.setenv("REMOTE_METRIC_KEY", KEY)


def write_config(tmp_path: Path, url: str, **over: Any) -> Path:
    config = {**json.loads(SAMPLE.read_text()), "url": url, "backoff_seconds": 0, **over}
    path = tmp_path / "remote.json"
    path.write_text(json.dumps(config))
    return path


def test_registered_by_its_decorator() -> None:
    assert gym_metrics.resolve_server("remote_metric") is RemoteMetricServer


def test_config_errors_fail_when_the_server_is_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_metric({}) is None
    monkeypatch.setenv("REMOTE_METRIC_CONFIG", str(tmp_path / "none.json"))
    with pytest.raises(GymMetricsError, match="no such file"):
        RemoteMetricServer()
    monkeypatch.setenv("REMOTE_METRIC_CONFIG", str(write_config(tmp_path, "http://x/score", scores=[])))
    with pytest.raises(InvalidInputError, match="invalid config"):
        RemoteMetricServer()
    monkeypatch.delenv("REMOTE_METRIC_KEY")
    monkeypatch.setenv("REMOTE_METRIC_CONFIG", str(write_config(tmp_path, "http://x/score")))
    with pytest.raises(InvalidInputError, match="API key not found"):
        RemoteMetricServer()


async def test_unconfigured_server_reports_it_on_verify() -> None:
    with pytest.raises(GymMetricsError, match="remote_metric is not configured"):
        await RemoteMetricServer().verify_dict(ROWS[0])


async def test_verify_from_the_sample_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedJudge([ok({"result": {"accuracy": 1}, "latency_ms": "7"})]) as judge:
        monkeypatch.setenv("REMOTE_METRIC_CONFIG", str(write_config(tmp_path, f"{judge.url}/chat/completions")))
        server = RemoteMetricServer()
        out = await server.verify_dict(ROWS[0])
        await server.metric.aclose()
    assert out["reward"] == 1.0 and out["accuracy"] == 1.0 and out["latency_ms"] == 7.0
    assert out["accuracy_out_of_range"] == 0.0 and out["metric"] == "remote"
    properties = server.server_info()["verify_response_schema"]["properties"]
    assert {"accuracy", "latency_ms", "accuracy_out_of_range"} <= set(properties)  # for evaluate --server
    [sent] = judge.requests
    assert sent.body["answer"] == "4" and sent.body["tags"] == ["math"] and sent.body["prompt"] == "Q: What is 2+2?\nA: 4"
    assert sent.header("Authorization") == f"Bearer {KEY}"


async def test_missing_column_is_invalid_input_and_endpoint_failure_a_row_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedJudge([Reply(400, f"bad {KEY}")]) as judge:
        monkeypatch.setenv("REMOTE_METRIC_CONFIG", str(write_config(tmp_path, f"{judge.url}/chat/completions")))
        server = RemoteMetricServer()
        with pytest.raises(InvalidInputError) as info:
            await server.verify_dict({"question": "q"})
        assert info.value.violations[0].field == "body.answer"
        assert "columns are: question, response" in info.value.violations[0].description
        with pytest.raises(RowError, match=r"endpoint: HTTP 400: bad \*\*\*"):
            await server.verify_dict(ROWS[0])
        await server.metric.aclose()


@pytest.mark.parametrize("name", ["reward", "metric", "mask_sample"])
def test_a_score_named_like_a_response_field_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    path = tmp_path / "nat.json"
    path.write_text(json.dumps({"type": "nemo-agent-toolkit-remote", "url": "http://127.0.0.1:1/x", "evaluator_name": name}))
    monkeypatch.setenv("REMOTE_METRIC_CONFIG", str(path))
    with pytest.raises(InvalidInputError, match=f"score name '{name}' is a field of the verify response"):
        RemoteMetricServer()


async def test_nat_config_over_a_grpc_verify_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics._transport.server import ServerConfig, start_server

    def respond(body: dict[str, Any]) -> Any:
        if body["item"]["question"] == "Capital of France?":
            return ok({"success": False, "result": None, "error": "judge offline"})
        return ok({"success": True, "result": {"id": 0, "score": 0.5, "reasoning": "half"}})

    with ScriptedJudge([respond] * 2) as judge:
        path = tmp_path / "nat.json"
        path.write_text(json.dumps({
            "type": "nemo-agent-toolkit-remote", "url": f"{judge.url}/chat/completions", "evaluator_name": "accuracy",
        }))
        monkeypatch.setenv("REMOTE_METRIC_CONFIG", str(path))
        env = RemoteMetricServer()
        server = await start_server(env, ServerConfig(port=0, log_requests=False))
        try:
            async with ResourcesClient(server.address) as client:
                outcomes = [o async for o in client.verify_stream([(0, 0, ROWS[0]), (1, 0, ROWS[1])])]
        finally:
            await server.stop(0)
            await env.metric.aclose()
    good, failed = outcomes
    assert good.error_kind is None and good.reward == 0.5 and good.response["accuracy"] == 0.5  # named after the evaluator
    assert failed.error_kind == "verify_failed" and "judge offline" in failed.error_message
    assert {r.body["evaluator_name"] for r in judge.requests} == {"accuracy"}


async def test_evaluate_server_reports_every_configured_score(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics._transport.server import ServerConfig, start_server
    from gym_metrics.evaluation import evaluate_remote_async

    def respond(body: dict[str, Any]) -> Any:
        return ok({"result": {"accuracy": 1.0 if body["answer"] == body["expected"] else 0.0}, "latency_ms": 3})

    with ScriptedJudge([respond] * 2) as judge:
        monkeypatch.setenv("REMOTE_METRIC_CONFIG", str(write_config(tmp_path, f"{judge.url}/chat/completions")))
        env = RemoteMetricServer()
        server = await start_server(env, ServerConfig(port=0, log_requests=False))
        try:
            result = await evaluate_remote_async(server.address, ROWS)
        finally:
            await server.stop(0)
            await env.metric.aclose()
    assert list(result.column("accuracy")) == [1.0, 0.0]
    assert list(result.column("latency_ms")) == [3.0, 3.0]
    assert list(result.column("accuracy_out_of_range")) == [0.0, 0.0]
