"""Shared pieces of the SDK tests: loopback scoring endpoints (generic remote and NeMo Agent
Toolkit), a judge that answers every judge prompt of the built-in metrics by its content, and
rows for each metric, and the call shapes of ../shared/reference/nemo_evaluator_sdk_calls.md as
cases (metric, rows, expected means) that the local and the server tests both run."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from gym_metrics.sdk import (
    AgentGoalAccuracyMetric,
    AnswerAccuracyMetric,
    JSONScoreParser,
    Metric,
    Model,
    NemoAgentToolkitRemoteMetric,
    RemoteMetric,
    RemoteScore,
    SecretRef,
    ToolCallAccuracyMetric,
    ToolCallingMetric,
    TopicAdherenceMetric,
)
from gym_metrics.testing import LoopbackServer, Recorded, Reply, completion

JSON = {"Content-Type": "application/json"}


class ScoringEndpoint(LoopbackServer):
    """A user's metric server: `/evaluate` answers `{"result": {"accuracy": reference ==
    response}}`; `/evaluate_item` (NeMo Agent Toolkit) answers `{"success": true, "result":
    {"score": ...}}` for the item's reference / output. Each answer waits `delay` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.delay = delay
        self.evaluate_url = f"http://127.0.0.1:{self.port}/evaluate"
        self.item_url = f"http://127.0.0.1:{self.port}/evaluate_item"

    def _take(self, request: Recorded) -> Any:
        return None

    def _reply(self, item: Any, request: Recorded) -> Reply:
        time.sleep(self.delay)
        body = request.body
        if request.path == "/evaluate":
            match = float(str(body.get("reference")).strip() == str(body.get("response")).strip())
            return Reply(200, json.dumps({"result": {"accuracy": match}}), JSON)
        if request.path == "/evaluate_item":
            item = body.get("item") or {}
            score = 1.0 if item.get("reference") == item.get("output") else 0.25
            return Reply(200, json.dumps({"success": True, "result": {"score": score}}), JSON)
        return Reply(404, f"no route {request.path}")


def judge_answer(prompt: str) -> str:
    """The judge's reply to each prompt the judge metrics send (matched on their wording)."""
    if "List every distinct topic" in prompt:
        topics = ["weather in Paris"] + (["stock tips"] if "stock" in prompt.split("real input")[-1] else [])
        return json.dumps({"topics": topics})
    if "refused, or declined" in prompt:
        return json.dumps({"refused_to_answer": False})  # the agent answers every topic
    if "falls under at least one reference topic" in prompt:
        numbered = prompt.split("real input")[-1]
        return json.dumps({"classifications": [True] + ([False] if "stock tips" in numbered else [])})
    if "State the user_goal" in prompt:
        booked = "booked" in prompt.split("real input")[-1]
        return json.dumps({"user_goal": "book a table", "end_state": "table booked" if booked else "nothing done"})
    if "Compare the desired outcome" in prompt:
        arrived = prompt.split("real input")[-1]
        return json.dumps({"reason": "r", "verdict": "1" if "table booked" in arrived else "0"})
    if "User Answer" in prompt:
        return "4" if "Paris" in prompt.split("User Answer:")[1].split("\n")[0] else "0"
    return "unrecognised prompt"


class Judge(LoopbackServer):
    """An OpenAI-compatible judge answering every prompt with `judge_answer`."""

    def _take(self, request: Recorded) -> Any:
        return None

    def _reply(self, item: Any, request: Recorded) -> Reply:
        if request.path != "/v1/chat/completions":
            return Reply(404, f"no route {request.path}")
        return Reply(200, completion(judge_answer(request.text)), JSON)


def tool_call_rows() -> list[dict[str, Any]]:
    """tool_call_accuracy rows: right calls, a wrong argument, a missing call."""
    def row(calls: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "user_input": [{"content": "weather?", "type": "human"}, {"content": "", "type": "ai", "tool_calls": calls}],
            "reference_tool_calls": [{"name": "weather", "args": {"city": "Paris"}}],
        }

    return [row([{"name": "weather", "args": {"city": "Paris"}}]), row([{"name": "weather", "args": {"city": "Rome"}}]), row([])]


def tool_calling_rows() -> list[dict[str, Any]]:
    """tool_calling rows: a chat-completions `response` and the reference under `tool_calls`."""
    def row(name: str, args: dict[str, Any]) -> dict[str, Any]:
        call = {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        return {
            "response": {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [call]}}]},
            "tool_calls": [{"function": {"name": "weather", "arguments": {"city": "Paris"}}}],
        }

    return [row("weather", {"city": "Paris"}), row("weather", {"city": "Rome"}), row("news", {})]


def conversation(*turns: tuple[str, str]) -> list[dict[str, str]]:
    return [{"type": kind, "content": text} for kind, text in turns]


def topic_rows() -> list[dict[str, Any]]:
    on = conversation(("human", "weather in Paris?"), ("ai", "Sunny."))
    off = conversation(("human", "weather in Paris?"), ("ai", "Sunny."), ("human", "any stock tips?"), ("ai", "Buy ACME."))
    return [{"user_input": on, "reference_topics": ["weather"]}, {"user_input": off, "reference_topics": ["weather"]}]


def goal_rows() -> list[dict[str, Any]]:
    done = conversation(("human", "book a table"), ("ai", "Your table is booked."))
    failed = conversation(("human", "book a table"), ("ai", "I cannot."))
    return [{"user_input": done, "reference": "a table is booked"}, {"user_input": failed, "reference": "a table is booked"}]


def answer_rows() -> list[dict[str, Any]]:
    return [
        {"user_input": "capital of France?", "response": "Paris", "reference": "Paris"},
        {"user_input": "capital of France?", "response": "Lyon", "reference": "Paris"},
    ]


# ----------------------------------------------------------------------------- the call shapes

JUDGE_KEY = "sk-sdk-judge-0042"


def judge_model(judge: Judge) -> Model:
    return Model(url=f"{judge.url}/chat/completions", name="judge-model", api_key_secret=SecretRef(root="judge-api-key"))


Case = Callable[[ScoringEndpoint, Judge], tuple[Metric, list[dict[str, Any]], dict[str, float]]]


def remote(endpoint: ScoringEndpoint, judge: Judge) -> tuple[Metric, list[dict[str, Any]], dict[str, float]]:
    metric = RemoteMetric(
        url=endpoint.evaluate_url,
        body={"reference": "{{item.reference}}", "response": "{{item.output}}"},
        scores=[RemoteScore(name="accuracy", parser=JSONScoreParser(json_path="$.result.accuracy"),
                            description="exact match", minimum=0.0, maximum=1.0)],
        timeout_seconds=30.0, max_retries=3,
    )  # fmt: skip
    rows = [{"reference": "Paris", "output": "Paris"}, {"reference": "2", "output": "2"}, {"reference": "3", "output": "4"}]
    return metric, rows, {"accuracy": 2 / 3, "accuracy_out_of_range": 0.0}


def nat(endpoint: ScoringEndpoint, judge: Judge) -> tuple[Metric, list[dict[str, Any]], dict[str, float]]:
    metric = NemoAgentToolkitRemoteMetric(
        url=endpoint.item_url, evaluator_name="similarity_eval", timeout_seconds=30.0, max_retries=3
    )
    rows = [{"reference": "Paris", "output": "Paris"}, {"reference": "2", "output": "3"}]
    return metric, rows, {"similarity_eval": 0.625}


def tool_call_accuracy(endpoint: ScoringEndpoint, judge: Judge) -> tuple[Metric, list[dict[str, Any]], dict[str, float]]:
    return ToolCallAccuracyMetric(), tool_call_rows(), {"tool_call_accuracy": 1 / 3}


def tool_calling(endpoint: ScoringEndpoint, judge: Judge) -> tuple[Metric, list[dict[str, Any]], dict[str, float]]:
    expected = {"function_name_accuracy": 2 / 3, "function_name_and_args_accuracy": 1 / 3}
    return ToolCallingMetric(reference="{{item.tool_calls}}"), tool_calling_rows(), expected


def topic_adherence(endpoint: ScoringEndpoint, judge: Judge) -> tuple[Metric, list[dict[str, Any]], dict[str, float]]:
    metric = TopicAdherenceMetric(metric_mode="f1", judge_model=judge_model(judge))
    f1 = 2 * (0.5 * 1.0) / (1.5 + 1e-10)  # the second row answers an off-reference topic
    return metric, topic_rows(), {"topic_adherence(mode=f1)": pytest.approx((1.0 + f1) / 2)}  # type: ignore[dict-item]


def goal_accuracy(endpoint: ScoringEndpoint, judge: Judge) -> tuple[Metric, list[dict[str, Any]], dict[str, float]]:
    return AgentGoalAccuracyMetric(use_reference=True, judge_model=judge_model(judge)), goal_rows(), {"agent_goal_accuracy": 0.5}


def answer_accuracy(endpoint: ScoringEndpoint, judge: Judge) -> tuple[Metric, list[dict[str, Any]], dict[str, float]]:
    return AnswerAccuracyMetric(judge_model=judge_model(judge)), answer_rows(), {"nv_accuracy": 0.5}


CASES = [remote, nat, tool_call_accuracy, tool_calling, topic_adherence, goal_accuracy, answer_accuracy]
