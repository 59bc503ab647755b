"""Environments that answer each turn (reset / step; issue 41 item 3), natively: collect drives
them as NeMo Gym's gymnasium_agent does (reset's observation after the prompt, a step per
policy turn, the observation as the next user message, tool outputs from `info`, the reward
summed, the episode over on terminated / truncated / max steps), over a real gRPC server and a
scripted policy; and the Step call's own rules (a step that ends the episode closes its
session; the environment's bad answers and errors named; Step on a tool environment refused)."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.environments import Session, SimpleResourcesServer, StepResult
from gym_metrics.testing import ScriptedPolicyServer, serve_environment
from gym_metrics._transport.client import RemoteCallError, ResourcesClient, SessionLostError
from gym_metrics.errors import InvalidInputError


def said(response: dict[str, Any]) -> str:
    return "".join(c.get("text", "") for item in response["output"] if item.get("type") == "message"
                   for c in item.get("content", []) if isinstance(c, dict))  # fmt: skip


class GuessTheNumber(SimpleResourcesServer):
    """The model guesses `secret` (1..100); the environment answers higher / lower; a right guess
    ends the episode with reward 1, each wrong one costs 0.1; `give_up` in the text truncates."""

    async def reset(self, session: Session) -> tuple[str | None, dict[str, Any]]:
        session.state["guesses"] = 0
        return "I am thinking of a number from 1 to 100.", {"range": [1, 100]}

    async def step(self, session: Session, response: dict[str, Any]) -> StepResult:
        text = said(response)
        if "give up" in text:
            return StepResult(None, 0.0, False, True, {"why": "gave up"})
        session.state["guesses"] += 1
        found = re.findall(r"\d+", text)
        if not found:
            return StepResult("Say a number.", -0.1, False, False, {})
        guess, secret = int(found[-1]), int(session.row["secret"])
        if guess == secret:
            return StepResult(None, 1.0, True, False, {"guesses": session.state["guesses"]})
        return StepResult(f"Higher than {guess}." if guess < secret else f"Lower than {guess}.", -0.1, False, False, {})


def bisect(prompt: str) -> str:
    """A policy that halves the range by what the last observation said."""
    if prompt.startswith("I am thinking"):
        return "50"
    m = re.match(r"(Higher|Lower) than (\d+)\.", prompt)
    assert m, prompt
    # the scripted server sees only the last message: keep the bounds in the guess history
    low, high = BOUNDS.setdefault("range", [1, 100])
    guess = int(m.group(2))
    if m.group(1) == "Higher":
        low = guess + 1
    else:
        high = guess - 1
    BOUNDS["range"] = [low, high]
    return str((low + high) // 2)


BOUNDS: dict[str, list[int]] = {}


def task(n: int, secret: int, prompt: str = "Let's play.") -> dict[str, Any]:
    return {"responses_create_params": {"input": [{"role": "user", "content": prompt}]}, "secret": secret, "agent_ref": {"name": "guesser_gymnasium_agent"}, "_ng_task_index": n, "_ng_rollout_index": 0}


async def collect(tmp_path: Path, env: Any, rows: list[dict[str, Any]], answers: Any, *extra: str) -> list[dict[str, Any]]:
    from gym_metrics.cli import main as cli_main

    tmp_path = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    tmp_path.mkdir()
    src = tmp_path / "tasks.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    async with serve_environment(env) as server:
        with ScriptedPolicyServer(answers) as policy:
            args = ["collect", "--server", server.address, "--input", str(src), "--output", str(out), "--policy-url", policy.url,
                    "--policy-model", "scripted", "--policy-concurrency", "1", *extra]  # fmt: skip
            assert await asyncio.to_thread(cli_main, args) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


async def test_an_episode_runs_turn_by_turn_to_its_end(tmp_path: Path) -> None:
    BOUNDS.clear()
    [row] = await collect(tmp_path, GuessTheNumber, [task(0, 37)], bisect)
    said_by_model = [said({"output": [i]}) for i in row["response"]["output"] if i.get("role") == "assistant" or i.get("type") == "message" and "role" not in i]
    observations = [i["content"] for i in row["response"]["output"] if i.get("role") == "user"]
    # 50 -> lower, 25 -> higher, 37: found on the third turn
    assert [i for i in said_by_model if i] == ["50", "25", "37"]
    assert observations == ["Lower than 50.", "Higher than 25."]
    assert row["reward"] == pytest.approx(1.0 - 0.1 - 0.1) and row["terminated"] is True and row["truncated"] is False
    assert row["info"] == {"guesses": 3}
    # the prompt, then reset's observation as a user message, as NeMo Gym's gymnasium_agent sends it
    assert row["responses_create_params"]["input"] == [{"role": "user", "content": "Let's play."},
                                                       {"content": "I am thinking of a number from 1 to 100.", "role": "user", "type": "message"}]
    assert row["_ng_task_index"] == 0 and "secret" not in row  # NeMo Gym's run response, the collector's keys
    # the environment server NeMo Gym 0.7.0 names for a gymnasium_agent (`wordle_gymnasium_agent` -> `wordle_environment_server`)
    assert (row["_ng_environment_server"], row["_ng_result_type"]) == ("guesser_environment_server", "legacy_agent")


async def test_max_steps_truncates_and_a_truncating_step_ends_it(tmp_path: Path) -> None:
    always_wrong = {"I am thinking of a number from 1 to 100.": "1", "Higher than 1.": "1"}
    rows = await collect(tmp_path, GuessTheNumber, [task(0, 99)], always_wrong, "--max-steps", "4")
    assert rows[0]["truncated"] is True and rows[0]["terminated"] is False
    assert rows[0]["reward"] == pytest.approx(-0.4)  # four wrong guesses, summed
    # an observation after each turn, the last one's too: NeMo Gym's loop appends it before it stops
    assert sum(i.get("role") == "user" for i in rows[0]["response"]["output"]) == 4
    gave_up = await collect(tmp_path, GuessTheNumber, [task(1, 5)], {"I am thinking of a number from 1 to 100.": "I give up"})
    assert gave_up[0]["truncated"] is True and gave_up[0]["reward"] == 0.0 and gave_up[0]["info"] == {"why": "gave up"}


class Broken(GuessTheNumber):
    async def step(self, session: Session, response: dict[str, Any]) -> StepResult:
        if "boom" in said(response):
            raise RuntimeError("the game crashed")
        return StepResult("again", float("nan"), False, False, {})  # type: ignore[return-value]


async def test_the_step_call_and_its_failures() -> None:
    async with serve_environment(Broken) as server:
        client = ResourcesClient(server.address)
        try:
            info = await client.server_info()
            assert info.steps is True and info.tools == []
            session, reset = await client.reset_session({"secret": 3})
            assert reset == {"observation": "I am thinking of a number from 1 to 100.", "info": {"range": [1, 100]}}
            turn = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "boom"}]}]}
            with pytest.raises(RemoteCallError, match="the game crashed"):
                await client.step(session, turn)
            with pytest.raises(SessionLostError):  # the episode failed: its session is gone
                await client.step(session, turn)
            session, _ = await client.reset_session({"secret": 3})
            calm = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "7"}]}]}
            with pytest.raises(RemoteCallError, match=r"reward nan; expected a finite number"):
                await client.step(session, calm)
            session, _ = await client.reset_session({"secret": 3})
            with pytest.raises(InvalidInputError, match="response_json: expected a Responses API object"):
                await client.step(session, {"text": "7"})
        finally:
            await client.close()
    async with serve_environment("math_exact") as server:
        client = ResourcesClient(server.address)
        try:
            assert (await client.server_info()).steps is False
            session = await client.seed_session({})
            with pytest.raises(InvalidInputError, match="does not answer turns"):
                await client.step(session, {"output": []})
        finally:
            await client.close()


class ResetBreaks(GuessTheNumber):
    async def reset(self, session: Session) -> tuple[str | None, dict[str, Any]]:
        raise RuntimeError("reset broke")


async def test_a_reset_that_raises_is_named() -> None:
    """It was reported as `seed_session raised RuntimeError`, a hook the environment has not."""
    async with serve_environment(ResetBreaks) as server, ResourcesClient(server.address) as client:
        with pytest.raises(RemoteCallError, match=r"reset raised RuntimeError: reset broke"):
            await client.reset_session({"secret": 3})


async def test_a_step_that_ends_the_episode_closes_its_session_on_the_stream() -> None:
    async with serve_environment(GuessTheNumber) as server:
        client = ResourcesClient(server.address)
        try:
            calls = client.session_stream()
            session, reset = await calls.reset_session({"secret": 4})
            assert reset["observation"].startswith("I am thinking")
            answer = await calls.step(session, {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]}]})
            assert answer == {"observation": None, "reward": 1.0, "terminated": True, "truncated": False, "info": {"guesses": 1}}
            with pytest.raises(SessionLostError):
                await calls.step(session, {"output": []})
            assert len(server.handler.sessions.store) == 0  # closed by the step, not left to expire
            await calls.aclose()
        finally:
            await client.close()


class Gymnasium(GuessTheNumber):
    """Answers as gymnasium code does: numpy rewards and flags, sets and arrays in info; a
    `seal` turn puts an object JSON cannot hold into info; the row's `seal_reset` its reset."""

    async def reset(self, session: Session) -> tuple[str | None, dict[str, Any]]:
        if session.row.get("seal_reset"):
            return "go", {"lock": asyncio.Lock()}
        return "go", {"legal": {"d4"}}

    async def step(self, session: Session, response: dict[str, Any]) -> tuple[Any, ...]:  # type: ignore[override]
        import numpy as np

        session.state["steps"] = session.state.get("steps", 0) + 1
        if "seal" in said(response):
            return "obs", 0.0, False, False, {"lock": asyncio.Lock()}
        return "obs", np.float32(0.5), np.bool_(False), False, {"mask": np.array([1, 0]), "tags": {"a"}}


async def test_gymnasium_answers_with_numpy_and_sets_are_served_and_ones_json_cannot_hold_are_named() -> None:
    turn = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "7"}]}]}
    async with serve_environment(Gymnasium) as server, ResourcesClient(server.address) as client:
        session, reset = await client.reset_session({"secret": 3})
        assert reset == {"observation": "go", "info": {"legal": ["d4"]}}  # a set as a list, as FastAPI answers NeMo Gym's
        assert await client.step(session, turn) == {"observation": "obs", "reward": 0.5, "terminated": False, "truncated": False, "info": {"mask": [1, 0], "tags": ["a"]}}
        sealed = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "seal"}]}]}
        with pytest.raises(RemoteCallError, match=r"step raised TypeError: Gymnasium.step returned info\['lock'\] of type Lock, which JSON cannot hold"):
            await client.step(session, sealed)
        with pytest.raises(RemoteCallError, match=r"reset raised TypeError: Gymnasium.reset returned info\['lock'\] of type Lock"):
            await client.reset_session({"secret": 3, "seal_reset": True})
        assert len(server.handler.sessions.store) == 0  # neither left a session the client cannot know of


class SlowReset(GuessTheNumber):
    """A reset that waits past the idle TTL (for a slot, say) before it takes its resource."""

    held: list[str] = []

    async def reset(self, session: Session) -> tuple[str | None, dict[str, Any]]:
        await asyncio.sleep(0.6)
        SlowReset.held.append(session.id)
        session.state["guesses"] = 0
        return "ready", {}

    async def close_session(self, session: Session) -> None:
        SlowReset.held.remove(session.id)


async def test_a_session_is_not_idle_while_its_own_reset_runs() -> None:
    """A reset longer than the TTL was swept mid-reset: its session id was answered already
    gone and what the reset took afterwards was never freed."""
    turn = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "3"}]}]}
    async with serve_environment(SlowReset, session_ttl_s=0.2) as server, ResourcesClient(server.address) as client:
        first = asyncio.ensure_future(client.reset_session({"secret": 3}))
        await asyncio.sleep(0.4)
        second = asyncio.ensure_future(client.reset_session({"secret": 3}))  # a seed sweeps the idle first: the resetting one is not idle
        session, _ = await first
        assert (await client.step(session, turn))["terminated"] is True
        await second
        await asyncio.sleep(0.3)
        server.handler.sessions.store.sweep()  # the second, idle now, expires
        assert len(server.handler.sessions.store) == 0
    assert SlowReset.held == []  # every reset's resource freed by its close


class BadToolOutputs(GuessTheNumber):
    """Answers a step with `tool_outputs` of the row's shape: one without a call_id, one a bare string."""

    async def step(self, session: Session, response: dict[str, Any]) -> StepResult:
        shape = session.row.get("tool_outputs_shape")
        if shape == "no_call_id":
            return StepResult("again", 0.0, False, False, {"tool_outputs": [{"output": "42"}]})
        if shape == "text":
            return StepResult("again", 0.0, False, False, {"tool_outputs": ["42"]})
        return StepResult(None, 1.0, True, False, {"tool_outputs": [{"call_id": "c1", "output": "42"}]})


async def test_tool_outputs_of_another_shape_fail_their_episode_named(tmp_path: Path) -> None:
    """info["tool_outputs"] without a call_id (or a bare string in it) stopped the whole collect
    with a KeyError (exit 1, one row written of eight); it is the environment's error, that
    episode's `verify_failed` naming it, and the others run."""
    rows = [{**task(n, 37), "tool_outputs_shape": ("no_call_id" if n == 2 else "text" if n == 5 else "fine")} for n in range(8)]
    done = await collect(tmp_path, BadToolOutputs, rows, lambda prompt: "50")
    by_task = {r["_ng_task_index"]: r for r in done}
    assert len(by_task) == 8 and all(by_task[n]["reward"] == 1.0 for n in (0, 1, 3, 4, 6, 7))
    assert by_task[2]["_gm_error"]["kind"] == "verify_failed" and "info['tool_outputs'][0]" in by_task[2]["_gm_error"]["message"]
    assert by_task[5]["_gm_error"]["kind"] == "verify_failed" and "expected {'call_id': text, 'output': text}" in by_task[5]["_gm_error"]["message"]


class Stalls(GuessTheNumber):
    async def step(self, session: Session, response: dict[str, Any]) -> StepResult:
        await asyncio.sleep(30)
        return await super().step(session, response)


async def test_a_step_that_never_answers_fails_at_the_tool_timeout_and_frees_its_session() -> None:
    """A step had no deadline: it held its session (and, for an environment of one session at a
    time, every later one) for as long as it ran."""
    turn = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "50"}]}]}
    async with serve_environment(Stalls, tool_timeout_s=0.5) as server:
        client = ResourcesClient(server.address)
        try:
            session, _ = await client.reset_session({"secret": 3})
            started = asyncio.get_running_loop().time()
            with pytest.raises(RemoteCallError, match=r"step raised TimeoutError: no answer within 0.5 s \(--tool-timeout\)"):
                await client.step(session, turn)
            assert asyncio.get_running_loop().time() - started < 10
            assert len(server.handler.sessions.store) == 0
        finally:
            await client.close()
