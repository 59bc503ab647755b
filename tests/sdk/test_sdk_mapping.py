"""Each SDK class maps onto the scorer / target / job-spec configs gym-metrics already takes,
secrets travel by name only, and a bad or unsupported argument is a clear error naming it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from gym_metrics.jobs import parse_spec
from gym_metrics.scorers import get_scorer
from gym_metrics.sdk import (
    Agent,
    AgentGoalAccuracyMetric,
    AnswerAccuracyMetric,
    Evaluator,
    InferenceParams,
    JSONScoreParser,
    Model,
    NemoAgentToolkitRemoteMetric,
    ReasoningParams,
    RemoteMetric,
    RemoteScore,
    RunConfig,
    RunConfigOnline,
    RunConfigOnlineModel,
    SecretRef,
    ToolCallAccuracyMetric,
    ToolCallingMetric,
    TopicAdherenceMetric,
    secret_env,
)
from gym_metrics.targets import parse_target

JUDGE = Model(url="http://127.0.0.1:9/v1/chat/completions", name="judge", api_key_secret="nvidia-api-key")
JUDGE_CONFIG = {"url": "http://127.0.0.1:9/v1/chat/completions", "model": "judge", "api_key_env": "NVIDIA_API_KEY"}


def test_importing_the_sdk_loads_no_grpc() -> None:
    code = "import sys, gym_metrics.sdk; assert 'grpc' not in sys.modules, 'grpc loaded'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("metric", "name", "config"),
    [
        (ToolCallAccuracyMetric(), "tool_call_accuracy", {}),
        (ToolCallAccuracyMetric(strict_order=False), "tool_call_accuracy", {"strict_order": False}),
        (ToolCallingMetric(reference="{{ item.tool_calls }}"), "tool_calling", {"reference_field": "tool_calls"}),
        (TopicAdherenceMetric(metric_mode="recall", judge_model=JUDGE), "topic_adherence", JUDGE_CONFIG),
        (AgentGoalAccuracyMetric(use_reference=False, judge_model=JUDGE), "agent_goal_accuracy", {**JUDGE_CONFIG, "use_reference": False}),
        (AnswerAccuracyMetric(judge_model=JUDGE), "answer_accuracy", JUDGE_CONFIG),
        (
            RemoteMetric(url="http://127.0.0.1:9/e", body={"r": "{{item.r}}"},
                         scores=[RemoteScore(name="acc", parser=JSONScoreParser(json_path="$.acc"), minimum=0.0)],
                         timeout_seconds=5.0, max_retries=1, api_key_secret=SecretRef(root="my-remote-api-key")),
            "remote",
            {"type": "remote", "url": "http://127.0.0.1:9/e", "timeout_seconds": 5.0, "max_retries": 1,
             "api_key_env": "MY_REMOTE_API_KEY", "body": {"r": "{{item.r}}"},
             "scores": [{"name": "acc", "minimum": 0.0, "parser": {"type": "json", "json_path": "$.acc"}}]},
        ),
        (
            NemoAgentToolkitRemoteMetric(url="http://127.0.0.1:9/evaluate_item", evaluator_name="similarity_eval"),
            "nemo-agent-toolkit-remote",
            {"type": "nemo-agent-toolkit-remote", "url": "http://127.0.0.1:9/evaluate_item", "evaluator_name": "similarity_eval"},
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_metrics_serialise_to_registered_scorer_configs(metric: Any, name: str, config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    assert metric.to_scorer() == (name, config)
    monkeypatch.setenv("NVIDIA_API_KEY", "k")
    monkeypatch.setenv("MY_REMOTE_API_KEY", "k")
    assert get_scorer(name, config).name == name  # the scorer accepts it as it is


def test_secret_names_map_to_environment_variable_names() -> None:
    assert secret_env("nvidia-api-key") == "NVIDIA_API_KEY"
    assert secret_env(SecretRef(root="my.remote-key")) == "MY_REMOTE_KEY"
    assert secret_env(SecretRef("OPENAI_API_KEY")) == "OPENAI_API_KEY"
    assert secret_env("lower_ok") == "lower_ok"
    with pytest.raises(ValueError, match="must not start with a digit"):
        secret_env("1-key")
    with pytest.raises(ValueError, match="a secret's name is empty"):  # it said "not str" of a str
        secret_env("")


def test_model_and_run_config_make_a_target_config() -> None:
    from gym_metrics.sdk._models import target_config

    config = RunConfigOnlineModel(
        parallelism=4, inference=InferenceParams(temperature=0.7, max_tokens=1024, top_p=0.9),
        system_prompt="detailed thinking on", reasoning=ReasoningParams(end_token="</think>"),
    )  # fmt: skip
    model = Model(url="https://host/v1/chat/completions", name="meta/llama-3.1-70b-instruct", api_key_secret="nvidia-api-key")
    target = target_config(model, config)
    assert target == {
        "type": "model", "url": "https://host/v1/chat/completions", "model": "meta/llama-3.1-70b-instruct",
        "api_key_env": "NVIDIA_API_KEY", "inference": {"temperature": 0.7, "max_tokens": 1024, "top_p": 0.9},
        "system_prompt": "detailed thinking on", "reasoning": {"end_token": "</think>"},
    }  # fmt: skip
    parsed = parse_target(target)
    assert parsed.endpoint() == "https://host/v1/chat/completions"  # type: ignore[union-attr]
    agent = Agent(url="http://127.0.0.1:9/agent", body={"q": "{{item.user_input}}"}, response_path="$.answer")
    assert parse_target(target_config(agent, RunConfigOnline())).type == "agent"


def test_a_job_spec_names_secrets_and_holds_no_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics.sdk._evaluator import Request

    monkeypatch.setenv("NVIDIA_API_KEY", "sk-never-in-a-spec")
    target = Model(url="http://127.0.0.1:9/v1", name="policy", api_key_secret="policy-key")
    request = Request.of(AnswerAccuracyMetric(judge_model=JUDGE), RunConfigOnlineModel(parallelism=2, limit_samples=1), target,
                         {"messages": [{"role": "user", "content": "{{item.user_input}}"}]})  # fmt: skip
    spec = request.spec([{"user_input": "q"}])
    assert spec["secrets"] == ["NVIDIA_API_KEY", "POLICY_KEY"]
    assert "sk-never-in-a-spec" not in repr(spec)
    parsed = parse_spec(spec)
    assert (parsed.scorer, parsed.run.parallelism, parsed.run.limit_samples) == ("answer_accuracy", 2, 1)
    assert parsed.secret_names() == ["NVIDIA_API_KEY", "POLICY_KEY"]


BAD: list[tuple[Callable[[], Any], type[Exception] | None, str]] = [
    (lambda: ToolCallAccuracyMetric(judge_model=JUDGE), pydantic.ValidationError, "'judge_model' have no gym-metrics equivalent"),  # type: ignore[call-arg]
    (lambda: ToolCallingMetric(reference="{{item.calls | tojson}}"), pydantic.ValidationError, "exactly '{{item.<field>}}'"),
    (lambda: TopicAdherenceMetric(metric_mode="f2", judge_model=JUDGE), pydantic.ValidationError, "metric_mode"),  # type: ignore[arg-type]
    (lambda: AnswerAccuracyMetric(), pydantic.ValidationError, "judge_model"),  # type: ignore[call-arg]
    (lambda: InferenceParams(temperature=0.7, stop=["\n"]), pydantic.ValidationError, "'stop' have no gym-metrics equivalent"),  # type: ignore[call-arg]
    (lambda: ReasoningParams(end_token="</think>", include_if_not_finished=True), pydantic.ValidationError, "include_if_not_finished"),  # type: ignore[call-arg]
    (lambda: Model(url="http://h/v1", name="m", format="nim"), pydantic.ValidationError, "'format'"),  # type: ignore[call-arg]
    (lambda: RemoteMetric(url="ftp://h", body={"a": "1"}, scores=[RemoteScore(name="a")]), pydantic.ValidationError, "http://"),
    (lambda: RemoteMetric(url="http://h", body={"a": "{{ item."}, scores=[RemoteScore(name="a")]), pydantic.ValidationError, "does not compile"),
    (lambda: RemoteMetric(url="http://h", body={"a": "1"}, scores=[RemoteScore(name="a", parser=JSONScoreParser(json_path="$["))]),
     pydantic.ValidationError, "not a JSONPath"),
    (lambda: RemoteMetric(url="http://h", body={"a": "1"}, scores=[]), pydantic.ValidationError, "scores"),
    (lambda: RemoteScore(name="Bad Name"), None, ""),  # checked when the metric is built: see the next line
    (lambda: RemoteMetric(url="http://h", body={"a": "1"}, scores=[RemoteScore(name="Bad Name")]), pydantic.ValidationError, "scores.0.name"),
    (lambda: RunConfig(parallelism=0), pydantic.ValidationError, "parallelism"),
    (lambda: Evaluator().run(metric="tool_call_accuracy", dataset=[]), TypeError, "gym_metrics.sdk metric"),  # type: ignore[arg-type]
    (lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=[], config={"parallelism": 2}), TypeError, "config must be RunConfig"),  # type: ignore[arg-type]
    (lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=[], prompt_template={"messages": []}), ValueError, "goes with a target"),
    (lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=[], config=RunConfigOnlineModel()), ValueError, "give target=Model"),
    (lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=[], target={"url": "http://h"}), TypeError, "Model(...) or Agent(...)"),  # type: ignore[arg-type]
    (lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=[], config=RunConfigOnline(), target=JUDGE), ValueError, "RunConfigOnlineModel"),
    (lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset="/nonexistent/rows.jsonl"), ValueError, "not a file"),
    (lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=[], target=JUDGE,
                             config=RunConfigOnlineModel(inference=InferenceParams(top_p=1.5))), ValueError, "target.inference.top_p"),
    (lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset={"user_input": []}), ValueError, "list of rows or a path"),  # type: ignore[dict-item]
    (lambda: Evaluator().job("x"), ValueError, "job server"),
]


@pytest.mark.parametrize(("call", "error", "message"), BAD, ids=range(len(BAD)))
def test_bad_arguments_are_clear_errors(call: Callable[[], Any], error: type[Exception] | None, message: str) -> None:
    if error is None:
        call()
        return
    with pytest.raises(error) as caught:
        call()
    assert message in str(caught.value)


def test_a_missing_secret_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NVIDIA_API_KEY", raising=False)
    with pytest.raises(ValueError, match="NVIDIA_API_KEY is not set"):
        Evaluator().run(metric=AnswerAccuracyMetric(judge_model=JUDGE), dataset=[{"user_input": "q", "response": "r", "reference": "r"}])
