"""The verifiers reward functions against a real server (math_exact).

Call-shape tests run everywhere: they call the functions the way verifiers' Rubric does
(verifiers 0.3.1, `verifiers/legacy/rubrics/rubric.py`: `Rubric._call_individual_reward_func`
passes the score objects `prompt`, `completion`, `answer`, `state`, `info`, `task` and the
class objects, filtered to the names the signature has; `_call_group_reward_func` the plural
ones; `_is_group_func` tells them apart by the plural names). The real-package tests run
verifiers' own `Rubric.score_group` / `score_rollout` (what `Environment._run_group_states` /
`_run_rollout_state` call) and skip where verifiers is not importable (verifiers 0.4 dropped
`vf.Rubric` for `verifiers.v1`: they skip there too). CI runs this file in a venv of its own with
`verifiers==0.3.1` (.ci/run: .venv311-vf), so they run there, the default failure mode included."""

from __future__ import annotations

import asyncio
import inspect
import math
import subprocess
import sys
from typing import Any

import pytest

from gym_metrics.integrations import RewardFailure
from gym_metrics.integrations.verifiers import reward_function, rubric
from gym_metrics.testing import serve_environment

pytestmark = pytest.mark.timeout(60)

PROMPT = [{"role": "user", "content": "What is 2+2?"}]
COMPLETIONS = [[{"role": "assistant", "content": "The answer is 4."}], [{"role": "assistant", "content": "5"}], "Answer: 4"]
GROUP_NAMES = {"states", "prompts", "completions", "answers", "tasks", "infos"}  # verifiers' _is_group_func


def objects(completion: Any, answer: Any = "4", info: Any = None) -> dict[str, Any]:
    """Rubric.score_objects: what one rollout's reward function may ask for by name."""
    state: dict[str, Any] = {"prompt": PROMPT, "completion": completion, "answer": answer, "info": info or {}}
    return {"prompt": PROMPT, "completion": completion, "answer": answer, "state": state, "info": info or {}, "task": None, "parser": object()}


async def call(func: Any, merged: dict[str, Any]) -> Any:
    """Rubric._call_individual_reward_func / _call_group_reward_func, without their catch-all."""
    params = inspect.signature(func).parameters
    allowed = merged if any(p.kind == p.VAR_KEYWORD for p in params.values()) else {k: v for k, v in merged.items() if k in params}
    result = func(**allowed)
    return await result if inspect.isawaitable(result) else result


def test_importing_the_adaptor_imports_no_verifiers() -> None:
    code = "import sys, gym_metrics.integrations.verifiers; print('verifiers' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_the_functions_are_told_apart_as_verifiers_does() -> None:
    single, group = reward_function("127.0.0.1:1"), reward_function("127.0.0.1:1", group=True, name="gm")
    assert not set(inspect.signature(single).parameters) & GROUP_NAMES
    assert set(inspect.signature(group).parameters) >= {"prompts", "completions", "answers", "infos", "states"}
    assert single.__name__ == "gym_metrics" and group.__name__ == "gm"  # the metric's name in verifiers


async def test_per_rollout_calls_of_a_group_give_the_servers_rewards() -> None:
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address)
        rewards = await asyncio.gather(*(call(fn, objects(c)) for c in COMPLETIONS))  # score_group gathers them
    assert rewards == [1.0, 0.0, 1.0]


async def test_the_group_function_scores_one_group_with_the_info_columns() -> None:
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address, group=True)
        merged = [objects(c, answer="", info={"expected_answer": "4"}) for c in COMPLETIONS]
        rewards = await call(fn, {"prompts": [PROMPT] * 3, "completions": COMPLETIONS, "answers": ["", "", ""],
                                  "states": [m["state"] for m in merged], "infos": [m["info"] for m in merged], "tasks": [None] * 3})  # fmt: skip
    assert rewards == [1.0, 0.0, 1.0]


async def test_group_lists_of_different_lengths_are_refused_not_scored_short() -> None:
    """Three completions with two answers gave two rewards (zip), the third rollout unscored."""
    async with serve_environment("math_exact") as server:
        fn = reward_function(server.address, group=True)
        merged = [objects(c) for c in COMPLETIONS]
        with pytest.raises(ValueError, match="reward function gym_metrics got 3 completions but 2 answers: one each, in order"):
            await call(fn, {"prompts": [PROMPT] * 3, "completions": COMPLETIONS, "answers": ["4", "4"],
                            "states": [m["state"] for m in merged], "infos": [{}] * 3, "tasks": [None] * 3})  # fmt: skip


async def test_a_completion_that_cannot_be_scored_is_never_a_silent_zero() -> None:
    async with serve_environment("math_exact") as server:  # without the label math_exact refuses the row
        nan = await call(reward_function(server.address, on_failure="nan"), objects("4", answer=""))
        with pytest.raises(RewardFailure, match="expected_answer"):
            await call(reward_function(server.address, on_failure="raise"), objects("4", answer=""))
        with pytest.raises(RewardFailure):  # the default marks the state; without one to mark, it raises
            await reward_function(server.address)(prompt=PROMPT, completion="4", answer="")
    assert math.isnan(nan)


# ----------------------------------------------------------------------------- verifiers itself


def _states(vf: Any, completions: list[Any], answer: str) -> list[Any]:
    return [vf.State(input={"prompt": PROMPT, "answer": answer, "info": {}, "example_id": 0}, completion=c, trajectory=[]) for c in completions]


async def test_verifiers_rubric_scores_a_group_and_a_rollout() -> None:
    vf = pytest.importorskip("verifiers", reason="verifiers is not installed (pip install verifiers<0.4: vf.Rubric)")
    if not hasattr(vf, "Rubric"):
        pytest.skip("this verifiers has no vf.Rubric (0.4 moved to verifiers.v1)")
    completions = [[vf.AssistantMessage(content="The answer is 4.")], [vf.AssistantMessage(content="5")], "Answer: 4"]
    async with serve_environment("math_exact") as server:
        rb = rubric(server.address)
        assert isinstance(rb, vf.Rubric)
        states = _states(vf, completions, "4")
        await rb.score_group(states)
        single = _states(vf, completions[:1], "4")[0]
        await rb.score_rollout(single)
        grouped = _states(vf, completions, "4")
        await rubric(server.address, group=True, name="gm").score_group(grouped)

        def length(completion: Any) -> float:
            return 0.5

        mixed = _states(vf, completions, "4")
        await vf.Rubric(funcs=[rb.funcs[0], length], weights=[1.0, 0.2]).score_group(mixed)
    assert [s["reward"] for s in states] == [1.0, 0.0, 1.0]
    assert [s["metrics"] for s in states] == [{"gym_metrics": 1.0}, {"gym_metrics": 0.0}, {"gym_metrics": 1.0}]
    assert [s["advantage"] for s in states] == pytest.approx([1 / 3, -2 / 3, 1 / 3])
    assert single["reward"] == 1.0
    assert [s["metrics"] for s in grouped] == [{"gm": 1.0}, {"gm": 0.0}, {"gm": 1.0}]
    assert [s["reward"] for s in mixed] == pytest.approx([1.1, 0.1, 1.1])


async def test_verifiers_rollout_that_cannot_be_scored_is_marked_errored() -> None:
    vf = pytest.importorskip("verifiers", reason="verifiers is not installed (pip install verifiers<0.4: vf.Rubric)")
    if not hasattr(vf, "Rubric"):
        pytest.skip("this verifiers has no vf.Rubric (0.4 moved to verifiers.v1)")
    async with serve_environment("math_exact") as server:
        states = _states(vf, ["4", "4"], "")  # no label: math_exact refuses each row
        await rubric(server.address).score_group(states)
    assert [s["reward"] for s in states] == [0.0, 0.0]
    assert all(isinstance(s["error"], vf.InfraError) and "expected_answer" in str(s["error"]) for s in states)
