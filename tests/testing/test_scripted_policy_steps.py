"""The scripted policy answers multi-turn episodes step by step: step k is the request carrying
k tool turns since its prompt, in the Responses API and in chat."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, step_of

CALL = PolicyAnswer(tool_calls=[{"name": "add", "arguments": {"n": 1}}, {"name": "add", "arguments": {"n": 2}}])
SCRIPT: dict[str, list[str | PolicyAnswer]] = {"count": [CALL, PolicyAnswer(tool_calls=[{"name": "get", "arguments": {}}]), "It is 3."]}


def _post(url: str, body: dict[str, Any]) -> tuple[int, Any]:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def _results(call_ids: list[str]) -> list[dict[str, Any]]:
    return [{"type": "function_call_output", "call_id": c, "output": "ok"} for c in call_ids]


def test_step_counts_tool_turns_since_the_last_user_message() -> None:
    user = {"role": "user", "content": "count"}
    assert step_of({"input": [user]}) == 0
    assert step_of({"input": [user, *_results(["a", "b"])]}) == 1  # two results of one turn
    assert step_of({"input": [user, *_results(["a"]), {"type": "function_call"}, *_results(["b"])]}) == 2
    assert step_of({"input": [*_results(["a"]), user]}) == 0  # a new prompt starts again
    chat = [user, {"role": "assistant", "tool_calls": []}, {"role": "tool", "content": "1"}, {"role": "tool", "content": "2"}]
    assert step_of({"messages": chat}) == 1
    assert step_of({"input": "count"}) == 0


def test_each_step_gets_its_answer_with_ids_of_its_own() -> None:
    tools = [{"type": "function", "name": "add", "parameters": {}}]
    with ScriptedPolicyServer(SCRIPT) as policy:
        prompt: list[Any] = [{"role": "user", "content": "count"}]
        base = {"model": "m", "tools": tools, "input": prompt}
        first = _post(policy.url + "/responses", base)[1]
        assert [(o["name"], o["call_id"], o["id"]) for o in first["output"]] == [("add", "call_0", "fc_0"), ("add", "call_1", "fc_1")]
        assert (first["tools"], first["tool_choice"], first["parallel_tool_calls"]) == (tools, "auto", True)
        turn = [*first["output"], *_results(["call_0", "call_1"])]
        second = _post(policy.url + "/responses", {**base, "input": prompt + turn})[1]
        assert [(o["name"], o["call_id"], o["id"]) for o in second["output"]] == [("get", "call_1_0", "fc_1_0")]
        turn += [*second["output"], *_results(["call_1_0"])]
        third = _post(policy.url + "/responses", {**base, "input": prompt + turn})[1]
        assert third["output"][0]["content"][0]["text"] == "It is 3." and third["output"][0]["id"] == "msg_2_0"
        turn += [*third["output"], *_results(["x"])]
        status, text = _post(policy.url + "/responses", {**base, "input": prompt + turn})
        assert status == 400 and "has 3 steps; step 3 was asked" in text


def test_chat_steps_answer_tool_calls_then_text() -> None:
    with ScriptedPolicyServer(SCRIPT) as policy:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "count"}]
        first = _post(policy.url + "/chat/completions", {"messages": messages})[1]
        calls = first["choices"][0]["message"]["tool_calls"]
        assert [c["id"] for c in calls] == ["call_0", "call_1"] and first["choices"][0]["finish_reason"] == "tool_calls"
        messages += [first["choices"][0]["message"], *({"role": "tool", "tool_call_id": c["id"], "content": "ok"} for c in calls)]
        second = _post(policy.url + "/chat/completions", {"messages": messages})[1]
        assert second["id"] == "chatcmpl-policy-1"
        assert second["choices"][0]["message"]["tool_calls"][0]["id"] == "call_1_0"
