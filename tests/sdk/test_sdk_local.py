"""The NeMo Evaluator call shapes (../shared/reference/nemo_evaluator_sdk_calls.md) on a local
`Evaluator()`: each metric with `run`, and with `submit` + `wait_until_done` + `get_result`,
against real loopback endpoints (a scoring server, a judge answering by prompt, a scripted
policy); results equal `gym_metrics.evaluation.evaluate` on the same rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.evaluation import evaluate
from gym_metrics.sdk import (
    AnswerAccuracyMetric,
    EvaluationResult,
    Evaluator,
    InferenceParams,
    Metric,
    Model,
    ReasoningParams,
    RunConfig,
    RunConfigOnlineModel,
    ToolCallAccuracyMetric,
    TopicAdherenceMetric,
)
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

from _sdk_helpers import CASES, JUDGE_KEY, Case, Judge, ScoringEndpoint, answer_rows, judge_model, tool_call_rows, topic_rows

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ScoringEndpoint, Judge]]:
    with ScoringEndpoint() as endpoint, Judge() as judge:
        yield endpoint, judge


@pytest.fixture(autouse=True)
def judge_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_API_KEY", JUDGE_KEY)  # the secret "judge-api-key", as an environment variable


def as_evaluate(metric: Metric, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What gym_metrics.evaluation.evaluate gives on the same rows, under the SDK's score names."""
    name, config = metric.to_scorer()
    return EvaluationResult.from_document(evaluate(name, rows, config=config).to_dict(), metric.result_names()).to_dict()


def means(result: EvaluationResult) -> dict[str, float | None]:
    return {score.name: score.mean for score in result.aggregate_scores.scores}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_run_gives_the_nemo_names_and_equals_evaluate(case: Case, servers: tuple[ScoringEndpoint, Judge]) -> None:
    metric, rows, expected = case(*servers)
    evaluator = Evaluator()
    result = evaluator.run(metric=metric, dataset=rows)
    assert means(result) == expected
    for score in result.aggregate_scores.scores:
        assert score.count + score.nan_count == len(rows)
    assert [r.index for r in result.row_scores] == list(range(len(rows)))
    assert result.to_dict() == as_evaluate(metric, rows)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_submit_wait_and_get_result_equal_run(case: Case, servers: tuple[ScoringEndpoint, Judge]) -> None:
    metric, rows, _ = case(*servers)
    evaluator = Evaluator()
    job = evaluator.submit(metric=metric, dataset=rows, config=RunConfig(parallelism=4))
    assert job.name.startswith("local-")
    assert job.wait_until_done(timeout=30) == "SUCCEEDED" == job.status()
    assert job.get_result().to_dict() == evaluator.run(metric=metric, dataset=rows).to_dict()


def test_judge_requests_carry_the_secret_as_a_bearer_key(servers: tuple[ScoringEndpoint, Judge]) -> None:
    _, judge = servers
    before = len(judge.requests)
    Evaluator().run(metric=AnswerAccuracyMetric(judge_model=judge_model(judge)), dataset=answer_rows()[:1])
    sent = judge.requests[before:]
    assert sent and all(r.header("Authorization") == f"Bearer {JUDGE_KEY}" for r in sent)
    assert all(r.body["model"] == "judge-model" for r in sent)


def test_topic_modes_pick_one_score_of_evaluate(servers: tuple[ScoringEndpoint, Judge]) -> None:
    _, judge = servers
    rows = topic_rows()
    plain = evaluate("topic_adherence", rows, config=judge_model(judge).judge_config())
    for mode in ("f1", "precision", "recall"):
        result = Evaluator().run(metric=TopicAdherenceMetric(metric_mode=mode, judge_model=judge_model(judge)), dataset=rows)
        (score,) = result.aggregate_scores.scores
        assert score.name == f"topic_adherence(mode={mode})"
        assert score.mean == plain.stats[plain.score_names.index(f"topic_adherence_{mode}")].mean
        assert [r.scores for r in result.row_scores] == [
            {score.name: r["scores"][f"topic_adherence_{mode}"]} for r in plain.row_scores
        ]


def test_print_shows_the_aggregate_scores_as_json(servers: tuple[ScoringEndpoint, Judge], capsys: pytest.CaptureFixture[str]) -> None:
    result = Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=tool_call_rows())
    print(result.aggregate_scores)
    shown = json.loads(capsys.readouterr().out)
    (score,) = shown["aggregate_scores"]
    assert {"name", "count", "mean", "min", "max", "nan_count", "percentiles", "histogram"} <= set(score)
    assert (score["name"], score["count"], score["min"], score["max"]) == ("tool_call_accuracy", 3, 0.0, 1.0)
    first = result.aggregate_scores.scores[0]
    assert first.percentiles is not None and first.percentiles.p100 == 1.0
    assert sum(b.count for b in first.histogram.bins) == 3
    assert result.aggregate_scores["tool_call_accuracy"] is first
    assert json.loads(str(result))["row_scores"][0] == {"index": 0, "scores": {"tool_call_accuracy": 1.0}}


@pytest.mark.parametrize("kind", ["jsonl", "json"])
def test_a_path_dataset_gives_the_list_result(kind: str, tmp_path: Path) -> None:
    rows = tool_call_rows()
    path = tmp_path / f"rows.{kind}"
    path.write_text("\n".join(json.dumps(r) for r in rows) if kind == "jsonl" else json.dumps(rows))
    metric = ToolCallAccuracyMetric()
    from_list = Evaluator().run(metric=metric, dataset=rows).to_dict()
    assert Evaluator().run(metric=metric, dataset=path).to_dict() == from_list
    assert Evaluator().run(metric=metric, dataset=str(path), config=RunConfig(limit_samples=2)).to_dict()["row_scores"] == from_list["row_scores"][:2]


def test_online_run_with_a_model_target_and_a_prompt_template(servers: tuple[ScoringEndpoint, Judge]) -> None:
    _, judge = servers
    answers: dict[str, str | PolicyAnswer] = {"capital of France?": PolicyAnswer(text="Paris", reasoning=None), "capital of Italy?": "<think>hmm</think>Milan"}
    rows = [
        {"user_input": "capital of France?", "reference": "Paris", "response": "stale"},
        {"user_input": "capital of Italy?", "reference": "Rome", "response": "Paris"},  # superseded by Milan
    ]
    with ScriptedPolicyServer(answers) as policy:
        config = RunConfigOnlineModel(
            parallelism=4, inference=InferenceParams(temperature=0.7, max_tokens=1024),
            system_prompt="detailed thinking on", reasoning=ReasoningParams(end_token="</think>"),
        )  # fmt: skip
        target = Model(url=f"{policy.url}/chat/completions", name="meta/llama-3.1-70b-instruct")
        template = {"messages": [{"role": "user", "content": "{{item.user_input}}"}]}
        result = Evaluator().run(
            metric=AnswerAccuracyMetric(judge_model=judge_model(judge)), dataset=rows, config=config,
            target=target, prompt_template=template,
        )  # fmt: skip
        job = Evaluator().submit(
            metric=AnswerAccuracyMetric(judge_model=judge_model(judge)), dataset=rows, config=config,
            target=target, prompt_template=template,
        )  # fmt: skip
        assert job.wait_until_done(timeout=30) == "SUCCEEDED"
        sent = policy.requests[0].body
    assert means(result) == {"nv_accuracy": 0.5}
    assert [r.generated["response"] for r in result.row_scores if r.generated] == ["Paris", "Milan"]
    assert sent["messages"][0] == {"role": "system", "content": "detailed thinking on"}
    assert (sent["temperature"], sent["max_tokens"], sent["model"]) == (0.7, 1024, "meta/llama-3.1-70b-instruct")
    assert job.get_result().to_dict()["aggregate_scores"] == result.to_dict()["aggregate_scores"]
