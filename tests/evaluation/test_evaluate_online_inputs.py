"""Online evaluate's input edges, on a real loopback policy (and a real tools server): a prompt
template file that cannot be used, a target given as its config object or as nothing usable,
tools with an agent target, a row's history sent as chat messages, a generated call whose
arguments are not JSON, and rows the environment or the generated turn cannot take."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.evaluation import ToolEnvironment, evaluate, evaluate_async
from gym_metrics.scorers import Scorer
from gym_metrics.targets import parse_target
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402

pytestmark = pytest.mark.timeout(60)


class ExactMatch(Scorer):
    name = "exact_match"
    score_names = ("exact_match",)
    eager = True

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        return {"exact_match": float(row["response"].strip() == row["reference"])}


ROW = {"user_input": "2+2?", "reference": "4"}


def model(policy: Any, **over: Any) -> dict[str, Any]:
    return {"type": "model", "url": policy.url, "model": "policy", "max_retries": 0, **over}


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read the prompt template: {f}: No such file or directory"),
        ("{oops", "prompt template is not JSON: {f}: unexpected character"),
        ("[1]", "bad prompt template: {f}: must be a JSON object, not list"),
        ("dir", "cannot read the prompt template: {f}: Is a directory"),
    ],
)
def test_a_prompt_template_file_that_cannot_be_used_is_refused_before_any_row(tmp_path: Path, content: str | None, said: str) -> None:
    path = tmp_path / "template.json"
    if content == "dir":
        path.mkdir()
    elif content is not None:
        path.write_text(content)
    with ScriptedPolicyServer({"2+2?": "4"}) as policy:
        with pytest.raises(InvalidInputError) as err:
            evaluate(ExactMatch(), [ROW], target=model(policy), prompt_template=path)
        assert not policy.requests
    assert str(err.value).startswith(said.format(f=path))


def test_a_target_config_object_is_used_as_given_and_anything_else_is_refused() -> None:
    with ScriptedPolicyServer({"2+2?": "4"}) as policy:
        result = evaluate(ExactMatch(), [ROW], target=parse_target(model(policy)))
        assert result.stats[0].mean == 1.0 and len(policy.requests) == 1
        with pytest.raises(InvalidInputError) as err:
            evaluate(ExactMatch(), [ROW], target=42)  # type: ignore[arg-type]
    assert str(err.value) == "bad target: target: must be a target config, a dict or a path, not int"


def test_tools_with_an_agent_target_are_refused() -> None:
    agent = {"type": "agent", "url": "http://127.0.0.1:9/run", "body": {"q": "{{ item.user_input }}"}, "response_path": "$.text"}
    with pytest.raises(InvalidInputError) as err:
        evaluate(ExactMatch(), [ROW], target=agent, tools=ToolEnvironment("127.0.0.1:9"))
    assert str(err.value) == "an environment's tools go with a model target: tools: an agent target runs its own tools"


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_rows_ragas_history_is_sent_with_call_ids_its_tool_answers_reuse(api: str) -> None:
    history = [
        {"type": "human", "content": "again"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "t", "args": None}, {"name": "u", "args": {"a": 1}}]},
        {"type": "tool", "content": "r1"}, {"type": "tool", "content": "r2"}, {"type": "tool", "content": "r3"},
    ]  # fmt: skip
    with ScriptedPolicyServer({"again": "ok"}) as policy:
        evaluate(ExactMatch(), [{"user_input": history, "reference": "ok"}], target=model(policy, api=api))
        (sent,) = policy.requests
    if api == "chat":
        calls = sent.body["messages"][1]["tool_calls"]
        assert [(c["id"], c["function"]["arguments"]) for c in calls] == [("call_1_0", "{}"), ("call_1_1", '{"a": 1}')]
        assert [m["tool_call_id"] for m in sent.body["messages"][2:]] == ["call_1_0", "call_1_1", "call_4"]  # the third answers no call
    else:
        items = sent.body["input"][1:]
        assert [(i["type"], i["call_id"]) for i in items] == [
            ("function_call", "call_1_0"), ("function_call", "call_1_1"),
            ("function_call_output", "call_1_0"), ("function_call_output", "call_1_1"), ("function_call_output", "call_4"),
        ]  # fmt: skip
        assert [i["arguments"] for i in items[:2]] == ["{}", '{"a": 1}']


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_generated_call_whose_arguments_are_not_json_is_kept_as_text_and_is_the_rows_error(api: str) -> None:
    script = {"book": PolicyAnswer(tool_calls=[{"name": "book", "arguments": "{not json"}])}
    with ScriptedPolicyServer(script) as policy:
        result = evaluate("tool_call_accuracy", [{"user_input": "book", "reference_tool_calls": [{"name": "book", "args": {}}]}],
                          target=model(policy, api=api))  # fmt: skip
    assert result.row_scores[0]["generated"]["tool_calls"] == [{"name": "book", "arguments": "{not json"}]
    failure = result.errors[0]
    assert (failure.field, failure.reason) == ("user_input[1].tool_calls[0].args", "must be an object, got a string (decode JSON-string arguments first)")


def test_a_generated_turn_that_cannot_join_the_rows_user_input_is_that_rows_error_with_the_generation_kept() -> None:
    rows = [{"user_input": {"q": "2+2?"}, "q": "2+2?", "reference_tool_calls": []}]
    with ScriptedPolicyServer({"2+2?": "4"}) as policy:
        result = evaluate("tool_call_accuracy", rows, target=model(policy), prompt_template={"messages": [{"role": "user", "content": "{{ item.q }}"}]})
    failure = result.errors[0]
    assert (failure.field, failure.reason) == ("user_input", "must be a string or a list of messages to append the generated turn to, got dict")
    assert result.row_scores[0]["generated"]["response"] == "4"


async def test_a_row_the_environment_refuses_to_seed_is_that_rows_error_and_the_others_run() -> None:
    script = {"add 2": [PolicyAnswer(tool_calls=[{"name": "increment_counter", "arguments": {"count": 2}}]), PolicyAnswer(text="done")]}
    rows = [{"user_input": "add 2", "initial_count": count, "reference_tool_calls": [{"name": "increment_counter", "args": {"count": 2}}]}
            for count in (0, "zero")]  # fmt: skip
    with ScriptedPolicyServer(script) as policy:
        async with serve_environment(Counter()) as server:
            target = model(policy, api="responses")
            result = await evaluate_async("tool_call_accuracy", rows, target=target, tools=ToolEnvironment(server.address))
            assert len(server.handler.sessions.store) == 0
    assert result.row_scores[0]["scores"] == {"tool_call_accuracy": 1.0}
    failure = result.errors[1]
    assert failure.field == "environment" and failure.reason.startswith("cannot seed a session of the row: the server rejected the request: the row does not fit Seed")
    assert "initial_count: Input should be a valid integer" in failure.reason


def test_a_rows_chat_messages_are_sent_as_given() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?", "name": "ann"}]
    with ScriptedPolicyServer({"2+2?": "4"}) as policy:
        result = evaluate(ExactMatch(), [{"user_input": messages, "reference": "4"}], target=model(policy))
        (sent,) = policy.requests
    assert sent.body["messages"] == messages and result.stats[0].mean == 1.0


async def test_an_episode_call_whose_arguments_are_not_json_reaches_the_scorer_as_text() -> None:
    script = {"add 2": [PolicyAnswer(tool_calls=[{"name": "increment_counter", "arguments": "{oops"}]), PolicyAnswer(text="done")]}
    rows = [{"user_input": "add 2", "initial_count": 0, "reference_tool_calls": [{"name": "increment_counter", "args": {"count": 2}}]}]
    with ScriptedPolicyServer(script) as policy:
        async with serve_environment(Counter()) as server:
            result = await evaluate_async("tool_call_accuracy", rows, target=model(policy, api="responses"), tools=ToolEnvironment(server.address))
    assert result.row_scores[0]["generated"]["tool_calls"] == [{"name": "increment_counter", "arguments": "{oops"}]
    failure = result.errors[0]
    assert (failure.field, failure.reason) == ("user_input[1].tool_calls[0].args", "must be an object, got a string (decode JSON-string arguments first)")
