"""The policy that replays recorded rollouts (`check-env --episodes`): per prompt, the model
turns of its first rollout, one answer per step, a turn ending where tool outputs begin."""

from __future__ import annotations

from typing import Any

from gym_metrics.testing import PolicyAnswer, replayed_script


def _rollout(prompt: str, *output: dict[str, Any], before: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"responses_create_params": {"input": [{"role": "user", "content": prompt}, *(before or [])]}, "response": {"output": list(output)}}


def _message(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def _call(name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "name": name, "arguments": arguments, "call_id": "c"}


OUTPUT = {"type": "function_call_output", "call_id": "c", "output": "4"}


def test_each_prompt_replays_the_turns_of_its_first_rollout() -> None:
    script = replayed_script([
        _rollout("add", _message("Adding."), _call("add", '{"a": 2, "b": 2}'), _call("log", "{}"), OUTPUT, OUTPUT, _message("4")),
        _rollout("add", _message("another rollout of the same prompt: not replayed")),
        _rollout("quiet"),  # no output at all: one empty answer
        _rollout("cut", _call("add", "{}"), OUTPUT),  # stopped at max_steps: its last turn is the calls
        {"no": "request"},
    ])  # fmt: skip
    assert script == {
        "add": [PolicyAnswer("Adding.", [{"name": "add", "arguments": '{"a": 2, "b": 2}'}, {"name": "log", "arguments": "{}"}]), PolicyAnswer("4")],
        "quiet": [PolicyAnswer()],
        "cut": [PolicyAnswer(tool_calls=[{"name": "add", "arguments": "{}"}])],
    }


def test_a_request_that_holds_tool_turns_is_answered_at_its_step() -> None:
    """A task whose input already has a tool turn after its prompt is asked at step 1."""
    script = replayed_script([_rollout("go on", _message("done"), before=[_call("add", "{}"), OUTPUT])])
    assert script == {"go on": [PolicyAnswer(), PolicyAnswer("done")]}
