"""Remote scorers (docs/metrics.md#remote-scorers) against real HTTP servers on loopback:
rendering, JSONPath scores,
retries (503 twice, always 503, 400, timeout, Retry-After), the bearer key, malformed JSON,
the NeMo Agent Toolkit format, the sandbox, config errors and `gym-metrics evaluate`."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest

import gym_metrics._util.http as shared_http
from gym_metrics.cli import main
from gym_metrics.errors import InvalidInputError
from gym_metrics.evaluation import evaluate_async
from gym_metrics.scorers import RowError, get_scorer, scorer_names
from gym_metrics.scorers.remote import NatRemoteScorer, RemoteScorer

from gym_metrics.testing import Reply, ScriptedJudge, Stall

KEY = "sk-remote-metric-secret-4242"
JSON = {"Content-Type": "application/json"}


def ok(data: Any) -> Reply:
    return Reply(200, json.dumps(data), JSON)


def config(url: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "type": "remote",
        "url": url,
        "body": {"question": "{{ item.question }}", "tags": "{{ item.tags }}", "prompt": "Q: {{ item.question }}"},
        "scores": [
            {"name": "accuracy", "parser": {"type": "json", "json_path": "$.result.accuracy"},
             "description": "exact match", "minimum": 0, "maximum": 1},
            {"name": "latency_ms", "parser": {"type": "json", "json_path": "$.latency"}},
        ],
        "backoff_seconds": 0.001,
        "max_backoff_seconds": 0.01,
    }
    base.update(over)
    return base


def endpoint(judge: ScriptedJudge) -> str:
    return f"{judge.url}/chat/completions"  # the only route the scripted server answers


ROW = {"question": "2+2?", "tags": ["math", 1], "answer": "4"}


@pytest.fixture
def delays(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Backoff delays, recorded; the real sleep is skipped (tests stay fast)."""
    seen: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        seen.append(seconds)

    monkeypatch.setattr(shared_http, "_sleep", fake_sleep)
    return seen


def test_registered() -> None:
    assert {"remote", "nemo-agent-toolkit-remote"} <= set(scorer_names())


async def test_scores_correctly_with_native_types_and_range_flags() -> None:
    with ScriptedJudge([ok({"result": {"accuracy": "0.75"}, "latency": 12}), ok({"result": {"accuracy": 1.5}})]) as judge:
        metric = get_scorer("remote", config(endpoint(judge)))
        assert metric.score_names == ("accuracy", "latency_ms", "accuracy_out_of_range")
        first = await metric.score(ROW)
        second = await metric.score(ROW)
        await metric.aclose()
    assert first == {"accuracy": 0.75, "latency_ms": 12.0, "accuracy_out_of_range": 0.0}
    assert second["accuracy"] == 1.5 and second["accuracy_out_of_range"] == 1.0  # kept, flagged
    assert math.isnan(second["latency_ms"])  # missing path
    sent = judge.requests[0]
    assert sent.body == {"question": "2+2?", "tags": ["math", 1], "prompt": "Q: 2+2?"}
    assert sent.header("Authorization") is None and metric.attempts == 2


async def test_503_twice_then_success_takes_three_attempts(delays: list[float]) -> None:
    busy = Reply(503, "busy")
    with ScriptedJudge([busy, busy, ok({"result": {"accuracy": 1}, "latency": 3})]) as judge:
        metric = get_scorer("remote", config(endpoint(judge)))
        scores = await metric.score(ROW)
        await metric.aclose()
    assert scores["accuracy"] == 1.0 and len(judge.requests) == 3 and metric.attempts == 3
    assert len(delays) == 2 and 0.0005 <= delays[0] <= 0.001 and 0.001 <= delays[1] <= 0.002  # backoff + jitter


async def test_always_503_gives_up_after_four_attempts(delays: list[float]) -> None:
    with ScriptedJudge([Reply(503, "down")] * 6) as judge:
        metric = get_scorer("remote", config(endpoint(judge)))
        with pytest.raises(RowError, match=r"HTTP 503.*gave up after 4 attempts") as info:
            await metric.score(ROW)
        await metric.aclose()
    assert info.value.field == "endpoint" and len(judge.requests) == 4 and len(delays) == 3


async def test_400_fails_at_once(delays: list[float]) -> None:
    with ScriptedJudge([Reply(400, "bad request: no field x"), ok({})]) as judge:
        metric = get_scorer("remote", config(endpoint(judge)))
        with pytest.raises(RowError, match="HTTP 400: bad request") as info:
            await metric.score(ROW)
        await metric.aclose()
    assert "gave up" not in str(info.value) and len(judge.requests) == 1 and delays == []


async def test_retry_after_is_honoured(delays: list[float]) -> None:
    with ScriptedJudge([Reply(429, "slow down", {"Retry-After": "0.005"}), ok({"result": {"accuracy": 0}})]) as judge:
        metric = get_scorer("remote", config(endpoint(judge)))
        assert (await metric.score(ROW))["accuracy"] == 0.0
        await metric.aclose()
    assert delays == [0.005]


async def test_slower_than_the_timeout(delays: list[float]) -> None:
    with ScriptedJudge([Stall(1.0), Stall(1.0)]) as judge:
        metric = get_scorer("remote", config(endpoint(judge), timeout_seconds=0.2, max_retries=1))
        with pytest.raises(RowError, match=r"timed out after 0.2 s.*gave up after 2 attempts"):
            await metric.score(ROW)
        await metric.aclose()
    assert len(judge.requests) == 2


async def test_connection_refused_is_retried(delays: list[float]) -> None:
    with ScriptedJudge() as judge:
        url = endpoint(judge)
    metric = get_scorer("remote", config(url, max_retries=2))  # the server is gone
    with pytest.raises(RowError, match=r"cannot reach the endpoint.*gave up after 3 attempts"):
        await metric.score(ROW)
    await metric.aclose()
    assert len(delays) == 2


async def test_bearer_key_is_sent_and_never_shown(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, delays: list[float]
) -> None:
    monkeypatch.setenv("REMOTE_METRIC_TEST_KEY", KEY)

    def needs_key(body: dict[str, Any]) -> Reply:  # the 401 echoes the key, as some servers do
        return Reply(401, f"invalid key {KEY}") if body.get("question") == "wrong" else ok({"result": {"accuracy": 1}})

    caplog.set_level(logging.DEBUG)
    with ScriptedJudge([needs_key, Reply(503, f"overloaded for {KEY}"), needs_key]) as judge:
        metric = get_scorer("remote", config(endpoint(judge), api_key_env="REMOTE_METRIC_TEST_KEY"))
        assert (await metric.score(ROW))["accuracy"] == 1.0
        with pytest.raises(RowError) as info:
            await metric.score({**ROW, "question": "wrong"})
        await metric.aclose()
    assert all(r.header("Authorization") == f"Bearer {KEY}" for r in judge.requests)
    assert "HTTP 401: invalid key ***" in str(info.value)
    assert KEY not in str(info.value) and KEY not in caplog.text and KEY not in repr(metric)
    assert "overloaded for ***" in caplog.text
    assert KEY not in metric.config.model_dump_json()


def test_missing_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REMOTE_METRIC_NO_SUCH_KEY", raising=False)
    with pytest.raises(InvalidInputError, match="API key not found"):
        get_scorer("remote", config("http://127.0.0.1:1/x", api_key_env="REMOTE_METRIC_NO_SUCH_KEY"))


async def test_malformed_json_is_a_row_error(delays: list[float]) -> None:
    answers = [
        Reply(200, "{'result': oops", JSON),
        ok({"result": {"accuracy": "high"}}),
        ok({"result": {"accuracy": None}}),
        ok({"result": {"accuracy": True}, "latency": False}),
        Reply(200, '{"result": {"accuracy": NaN}, "latency": 4}', JSON),  # Python's json.dumps writes NaN
    ]
    with ScriptedJudge(answers) as judge:
        metric = get_scorer("remote", config(endpoint(judge)))
        with pytest.raises(RowError, match="not valid JSON"):
            await metric.score(ROW)
        with pytest.raises(RowError, match=r"\$.result.accuracy is not a number: 'high'") as info:
            await metric.score(ROW)
        assert info.value.field == "response.accuracy"
        with pytest.raises(RowError, match=r"\$.result.accuracy is null"):  # the SDK fails the row too
            await metric.score(ROW)
        assert await metric.score(ROW) == {"accuracy": 1.0, "latency_ms": 0.0, "accuracy_out_of_range": 0.0}
        nan_answer = await metric.score(ROW)
        await metric.aclose()
    assert math.isnan(nan_answer["accuracy"]) and math.isnan(nan_answer["accuracy_out_of_range"])
    assert nan_answer["latency_ms"] == 4.0
    assert len(judge.requests) == 5 and delays == []  # not retried


async def test_nat_evaluate_item_endpoint() -> None:
    answers = [
        ok({"success": True, "result": {"id": 1, "score": 0.8, "reasoning": "close"}, "error": None}),
        ok({"success": False, "result": None, "error": "evaluator crashed: division by zero"}),
    ]
    with ScriptedJudge(answers) as judge:
        metric = get_scorer(
            "nemo-agent-toolkit-remote", {"url": endpoint(judge), "evaluator_name": "similarity", "backoff_seconds": 0}
        )
        assert isinstance(metric, NatRemoteScorer) and metric.score_names == ("similarity",)  # the SDK's name
        assert await metric.score(ROW) == {"similarity": 0.8}
        with pytest.raises(RowError, match="'similarity' failed: evaluator crashed: division by zero"):
            await metric.score(ROW)
        await metric.aclose()
    assert judge.requests[0].body == {"evaluator_name": "similarity", "item": ROW}


async def test_nat_via_the_remote_metric_and_evaluate_gives_nan_with_the_error() -> None:
    answers = [ok({"success": True, "result": {"score": 1}}), ok({"success": False, "error": "no model"})]
    with ScriptedJudge(answers) as judge:
        cfg = {"type": "nemo-agent-toolkit-remote", "url": endpoint(judge), "evaluator_name": "acc"}
        result = await evaluate_async("remote", [ROW, ROW], config=cfg, parallelism=1)
    values = result.column("acc")
    assert values[0] == 1.0 and math.isnan(values[1])
    assert "no model" in str(result.to_dict())


async def test_template_reaching_python_internals_is_refused() -> None:
    with ScriptedJudge([ok({"result": {"accuracy": 1}})] * 3) as judge:
        for template in ("{{ item.__class__.__mro__ }}", "x {{ item.question.__class__ }}", "{{ item.update({'a': 1}) }}"):
            metric = get_scorer("remote", config(endpoint(judge), body={"q": template}))
            with pytest.raises(RowError, match="refused by the sandbox") as info:
                await metric.score(ROW)
            assert info.value.field == "body.q"
            await metric.aclose()
    assert judge.requests == []  # nothing was sent


async def test_undefined_column_names_the_columns() -> None:
    metric = get_scorer("remote", config("http://127.0.0.1:1/x", body={"a": {"b": ["{{ item.questoin }}"]}}))
    with pytest.raises(RowError, match="columns are: answer, question, tags") as info:
        await metric.score(ROW)
    assert info.value.field == "body.a.b[0]"
    await metric.aclose()


def test_score_config_as_the_sdk_accepts_it() -> None:
    """NeMo Evaluator SDK's RemoteScore: the parser defaults to the score's name as the path;
    names may start with a digit; the description may be None."""
    cfg = config("http://127.0.0.1:1/x", scores=[{"name": "accuracy"}, {"name": "2nd_pass", "description": None,
                                                  "parser": {"json_path": "$.b"}}])
    metric = get_scorer("remote", cfg)
    specs = metric.config.scores  # type: ignore[attr-defined]
    assert [(s.name, s.parser.json_path) for s in specs] == [("accuracy", "accuracy"), ("2nd_pass", "$.b")]


@pytest.mark.parametrize(
    ("over", "match"),
    [
        ({"url": "ftp://x"}, "must start with http"),
        ({"body": None}, "needs 'body'"),
        ({"scores": []}, "needs 'scores'"),
        ({"scores": [{"name": "Acc", "parser": {"json_path": "$.a"}}]}, "should match pattern"),
        ({"scores": [{"name": "a", "parser": {"json_path": "$.["}}]}, "not a JSONPath"),
        ({"scores": [{"name": "a", "parser": {"type": "regex", "json_path": "$.a"}}]}, "json"),
        ({"scores": [{"name": "a", "parser": {"json_path": "$.a"}, "minimum": 2, "maximum": 1}]}, "above maximum"),
        ({"scores": [{"name": "a", "parser": {"json_path": "$.a"}}] * 2}, "unique"),
        ({"body": {"a": "{{ item. }}"}}, "does not compile"),
        ({"evaluator_name": "x"}, "only"),
        ({"type": "nemo-agent-toolkit-remote", "body": None, "scores": None}, "needs 'evaluator_name'"),
        ({"timeout_seconds": 0}, "greater than 0"),
        ({"max_retry": 2}, "Extra inputs"),
    ],
)
def test_config_errors_are_clear(over: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        get_scorer("remote", {**config("http://127.0.0.1:1/x"), **over})
    assert match in str(info.value) + str(info.value.violations)


def test_evaluate_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REMOTE_METRIC_TEST_KEY", KEY)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"q{i}", "tags": [i]}) + "\n" for i in range(3)))
    out = tmp_path / "result.json"

    def answer(body: dict[str, Any]) -> Reply:
        i = int(body["question"][1:])
        return Reply(400, f"no {KEY}") if i == 2 else ok({"result": {"accuracy": i}, "latency": 5})

    with ScriptedJudge([answer] * 3) as judge:
        path = tmp_path / "remote.json"
        path.write_text(json.dumps(config(endpoint(judge), api_key_env="REMOTE_METRIC_TEST_KEY")))
        code = main(["evaluate", "--metric", "remote", "--metric-config", str(path), "--input", str(rows), "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert [s["name"] for s in result["aggregate_scores"]] == ["accuracy", "latency_ms", "accuracy_out_of_range"]
    assert [r["scores"]["accuracy"] for r in result["row_scores"]] == [0.0, 1.0, None]
    assert result["row_scores"][2]["error"]["field"] == "endpoint"
    captured = capsys.readouterr()
    assert KEY not in out.read_text() and KEY not in captured.out and KEY not in captured.err


def test_remote_metric_class_is_exported() -> None:
    assert issubclass(NatRemoteScorer, RemoteScorer)


async def test_concurrency_is_bounded() -> None:
    with ScriptedJudge([Stall(0.05)] * 6) as judge:
        result = await evaluate_async(
            "remote", [ROW] * 6, config=config(endpoint(judge), max_concurrency=2), parallelism=6
        )
    assert len(judge.requests) == 6 and 1 <= judge.max_in_flight <= 2
    assert all(math.isnan(v) for v in result.column("accuracy"))  # the answer has no such path
