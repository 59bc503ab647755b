"""Issue 41 item 3, OpenEnv: an OpenEnv Environment class served unchanged (`openenv_server`,
`gym-metrics serve module:EnvClass`) runs multi-turn through collect (a real gRPC server, a
scripted policy over HTTP) with the turns and rewards OpenEnv's own client receives from
OpenEnv's own server for the same actions: typed actions from JSON text and from `step` tool
calls, an action text that fills an Action's one text field (OpenEnv's template environment,
rendered by `openenv init`), an MCP environment's tools, async reset/step, one session at a
time for a class without concurrent sessions, an episode already over at reset, and the
refusals (an action that does not fit, bad reset settings, a class that is no environment).
OpenEnv's own example environments, from its repository: test_openenv_repository.py."""

from __future__ import annotations

import asyncio
import importlib
import os
import subprocess
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from _openenv_reference import MAX_STEPS, assert_plays_as_client, client_episode, collect, need_openenv, openenv_server, read_back, shown, task, turns_policy
from gym_metrics.testing import PolicyAnswer, serve_environment

pytestmark = pytest.mark.usefixtures("_openenv")


@pytest.fixture
def _openenv() -> None:
    need_openenv()


def envs() -> Any:
    import openenv_envs

    return openenv_envs


def as_action(answer: Any) -> list[dict[str, Any] | None]:
    """The actions a scripted answer carries (None: one that does not fit), as the test means them."""
    if isinstance(answer, PolicyAnswer):
        return [call["arguments"] if call["name"] == "step" else None for call in answer.tool_calls]
    text = answer.strip().removeprefix("```json").removesuffix("```").strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return [None]
    return [value if isinstance(value, dict) and set(value) == {"dial", "value"} and 0 <= value["dial"] <= 2 else None]


def lock_plan(rng: random.Random) -> list[Any]:
    """Turns of JSON text, fenced JSON, `step` calls (two in one turn), and actions that do not fit."""
    plan: list[Any] = []
    for _ in range(MAX_STEPS):
        dial, value = rng.randrange(3), rng.randrange(10)
        kind = rng.choice(["json", "json", "fenced", "call", "calls", "bad_text", "bad_dial"])
        if kind == "json":
            plan.append(json.dumps({"dial": dial, "value": value}))
        elif kind == "fenced":
            plan.append(f"```json\n{json.dumps({'dial': dial, 'value': value})}\n```")
        elif kind == "call":
            plan.append(PolicyAnswer(tool_calls=[{"name": "step", "arguments": {"dial": dial, "value": value}}]))
        elif kind == "calls":
            plan.append(PolicyAnswer(tool_calls=[{"name": "step", "arguments": {"dial": dial, "value": value}},
                                                 {"name": "step", "arguments": {"dial": (dial + 1) % 3, "value": value}}]))  # fmt: skip
        elif kind == "bad_text":
            plan.append("turn the first dial to seven")
        else:
            plan.append(json.dumps({"dial": 5, "value": value}))
    return plan


async def test_typed_actions_play_as_openenvs_client_plays_them(tmp_path: Path) -> None:
    from gym_metrics.ecosystems.openenv import openenv_server as served

    lock = envs()
    rng = random.Random(41)
    plans = {f"Open lock #{i}.": lock_plan(rng) for i in range(6)}
    # a policy that knows the combination opens lock #6: the reward of an opened lock
    drawn = random.Random(606)  # (lock #6's seed: LockEnvironment draws its three digits from it)
    combination = [drawn.randrange(10) for _ in range(3)]
    plans["Open lock #6."] = [json.dumps({"dial": d, "value": v}) for d, v in enumerate(combination)]
    rows = [task(i, prompt, {"seed": 100 * i + 6, "hint": f"lock {i}"}) for i, prompt in enumerate(plans)]
    got = await collect(tmp_path, served(lock.LockEnvironment), rows, turns_policy(plans))
    assert sorted(got) == list(range(len(plans)))
    with openenv_server(lock.LockEnvironment, lock.LockAction, lock.LockObservation) as url:
        for index, (prompt, plan) in enumerate(plans.items()):
            row = got[index]
            valid = [a for answer in plan for a in as_action(answer) if a is not None]
            ref = await client_episode(url, {"seed": 100 * index + 6, "hint": f"lock {index}"}, valid)
            # every step OpenEnv's client took, the same rewards, what the model read turn for turn
            assert_plays_as_client(row, ref, (index, plan))
    assert got[6]["terminated"] and got[6]["reward"] == pytest.approx(0.75) and got[6]["info"]["state"]["tries"] == 3
    refused = [text for row in got.values() for text in read_back(row) if text.startswith("Invalid action:")]
    assert any("dial: Input should be less than or equal to 2" in t for t in refused)
    assert any("answer with a JSON object of LockAction's fields (dial, value)" in t for t in refused)


async def test_an_episode_done_at_reset_ends_at_its_first_turn(tmp_path: Path) -> None:
    """OpenEnv's reset may answer done (chess_env reset to a mated position): the episode ends
    at the first turn with no action sent, where OpenEnv's client stops; stepping it anyway
    would score moves in a game that is over."""
    from gym_metrics.ecosystems.openenv import openenv_server as served

    lock = envs()
    turn = json.dumps({"dial": 0, "value": 4})
    resets = {"Open an open lock.": {"seed": 3, "open": True}, "Open a lock.": {"seed": 3}}
    rows = [task(i, prompt, reset) for i, (prompt, reset) in enumerate(resets.items())]
    got = await collect(tmp_path, served(lock.LockEnvironment), rows, turns_policy({p: [turn] * 2 for p in resets}), max_steps=2)
    with openenv_server(lock.LockEnvironment, lock.LockAction, lock.LockObservation) as url:
        for index, reset in enumerate(resets.values()):
            assert_plays_as_client(got[index], await client_episode(url, reset, [{"dial": 0, "value": 4}] * 2), index)
    ended = got[0]
    assert ended["terminated"] is True and ended["reward"] == 0.0 and ended["info"]["openenv"] == [] and ended["info"]["state"]["tries"] == 0
    assert got[1]["info"]["openenv"] and got[1]["truncated"] is True  # the same turns where the lock is shut: stepped


async def test_openenvs_template_environment_takes_the_turns_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`openenv init` renders OpenEnv's example environment (an Action with one text field,
    `message`; reward min(0.1 * len, 1)); the turn's text is the message, whole."""
    from openenv.cli.commands import init as init_command

    from gym_metrics.ecosystems.openenv import openenv_server as served

    monkeypatch.setattr(init_command, "_generate_uv_lock", lambda _: False)  # (uv would reach the network)
    init_command.init("gm_echo", output_dir=str(tmp_path / "envs"))
    monkeypatch.syspath_prepend(str(tmp_path / "envs"))
    module = importlib.import_module("gm_echo.server.gm_echo_environment")
    models = importlib.import_module("gm_echo.models")
    try:
        said = {"Say things.": ["hi", "a longer sentence, with spaces ", "  padded  "], "Be brief.": ["", "ok", "fine"]}
        rows = [task(i, prompt) for i, prompt in enumerate(said)]
        got = await collect(tmp_path, served(module.GmEchoEnvironment), rows, turns_policy(said), "--max-steps", "3")
        with openenv_server(module.GmEchoEnvironment, models.GmEchoAction, models.GmEchoObservation) as url:
            for index, texts in enumerate(said.values()):
                ref = await client_episode(url, {}, [{"message": t} for t in texts][:3])
                assert got[index]["reward"] == pytest.approx(sum(s["reward"] for s in ref["steps"]))
                assert read_back(got[index]) == [shown(s["observation"]) for s in ref["steps"]]
        assert got[0]["reward"] == pytest.approx(0.2 + 1.0 + 1.0) and got[0]["truncated"] is True
    finally:
        for name in [m for m in sys.modules if m == "gm_echo" or m.startswith("gm_echo.")]:
            del sys.modules[name]


async def test_an_mcp_environments_tools_are_called_as_openenvs_client_calls_them(tmp_path: Path) -> None:
    from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

    from gym_metrics.ecosystems.openenv import openenv_server as served

    notes = envs().notes_environment()
    calls = {"Take notes.": [PolicyAnswer(tool_calls=[{"name": "add_note", "arguments": {"text": "milk"}}, {"name": "count_notes", "arguments": {}}]),
                             PolicyAnswer(tool_calls=[{"name": "add_note", "arguments": {"text": "eggs"}}, {"name": "erase", "arguments": {}}]),
                             "no tools this time",
                             PolicyAnswer(tool_calls=[{"name": "count_notes", "arguments": {}}])]}  # fmt: skip
    got = await collect(tmp_path, served(notes), [task(0, "Take notes.")], turns_policy(calls), "--max-steps", "4")
    read = read_back(got[0])
    assert read == ["noted (1)", '{"count":1}', "noted (2)", "Invalid action: no tool 'erase'; the tools: add_note, count_notes",
                    "Invalid action: call one of the tools: add_note, count_notes", '{"count":2}']  # fmt: skip
    actions = [{"type": "call_tool", "tool_name": c["name"], "arguments": c["arguments"]}
               for answer in calls["Take notes."] if isinstance(answer, PolicyAnswer) for c in answer.tool_calls if c["name"] != "erase"]  # fmt: skip
    with openenv_server(notes, CallToolAction, CallToolObservation) as url:
        ref = await client_episode(url, {}, actions)
    assert [shown(s["observation"]) for s in ref["steps"]] == [t for t in read if not t.startswith("Invalid action:")]
    assert got[0]["reward"] == sum(s["reward"] or 0.0 for s in ref["steps"]) == 0.0


async def test_async_methods_are_used_and_one_session_at_a_time_without_concurrent_sessions(tmp_path: Path) -> None:
    from gym_metrics.ecosystems.openenv import openenv_server as served

    lock = envs()
    counted = {"Count.": [json.dumps({"add": 2}), json.dumps({}), json.dumps({"add": 5})]}
    got = await collect(tmp_path, served(lock.AsyncCounter), [task(0, "Count.")], turns_policy(counted))
    assert got[0]["reward"] == 2.0 + 3.0 and got[0]["terminated"] is True  # done at 3: the third turn never sent
    assert read_back(got[0]) == ['{"total":2}'] and got[0]["info"]["openenv"] == [{"observation": {"metadata": {}, "total": 3}, "reward": 3.0, "done": True}]

    lock.SoloEnvironment.most = lock.SoloEnvironment.live = 0
    plans = {f"Open lock #{i}.": [json.dumps({"dial": 0, "value": i}), json.dumps({"dial": 1, "value": i})] for i in range(5)}
    rows = [task(i, p, {"seed": i}) for i, p in enumerate(plans)]
    solo = await collect(tmp_path, served(lock.SoloEnvironment), rows, turns_policy(plans), "--max-steps", "2", "--policy-concurrency", "5")
    assert sorted(solo) == list(range(5)) and all(r["truncated"] or r["terminated"] for r in solo.values())
    assert lock.SoloEnvironment.most == 1 and lock.SoloEnvironment.live == 0  # one at a time; every one closed


async def test_refusals_name_what_is_wrong(tmp_path: Path) -> None:
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics.ecosystems.openenv import adapt, openenv_server as served
    from gym_metrics.environments import resolve_server
    from gym_metrics.errors import InvalidInputError, NotFoundError

    lock = envs()
    async with serve_environment(served(lock.LockEnvironment)) as server, ResourcesClient(server.address) as client:
        with pytest.raises(InvalidInputError, match=r"openenv\.reset: expected an object of reset\(\)'s keyword arguments"):
            await client.reset_session({"openenv": {"reset": [3]}})
        session, reset = await client.reset_session({"openenv": {"reset": {"seed": 1, "unknown": "kept: reset takes **kwargs"}}})
        assert reset["info"]["openenv"]["done"] is False
        await client.close_session(session)
    assert resolve_server("openenv_envs:LockEnvironment", adapt=adapt).environment is lock.LockEnvironment
    with pytest.raises(NotFoundError, match="not an environment class"):
        resolve_server("openenv_envs:LockAction", adapt=adapt)

    from openenv.core.env_server.interfaces import Environment

    class Unannotated(Environment):  # no Action named anywhere
        def reset(self, *a: Any, **k: Any) -> Any: ...
        def step(self, action, *a: Any, **k: Any) -> Any: ...  # type: ignore[no-untyped-def]
        state = None

    with pytest.raises(InvalidInputError, match="cannot tell its Action class"):
        served(Unannotated)


def test_serve_takes_the_action_class_when_step_does_not_name_it(tmp_path: Path) -> None:
    """`gym-metrics serve module:EnvClass` in a process of its own: refused (exit 2, one line)
    when step() names only OpenEnv's base Action; served with --openenv-action."""
    from gym_metrics import ResourcesClient

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-m", "gym_metrics.cli", "serve", "openenv_envs:BaseActionLock", "--port", "0"]
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "BaseActionLock: cannot tell its Action class" in refused.stderr, refused.stderr
    bad = subprocess.run([*command, "--openenv-action", "openenv_envs:NoSuchAction"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--openenv-action" in bad.stderr and "NoSuchAction" in bad.stderr, bad.stderr
    server = subprocess.Popen([*command, "--openenv-action", "openenv_envs:LockAction"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        address = line.split("listening on ")[1].split()[0]

        async def play() -> dict[str, Any]:
            async with ResourcesClient(address) as client:
                session, _ = await client.reset_session({"openenv": {"reset": {"seed": 3}}})
                turn = {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": '{"dial": 0, "value": 0}'}]}]}
                return await client.step(session, turn)

        answer = asyncio.run(play())
        assert answer["info"]["openenv"][0]["observation"]["metadata"] == {"tries": 1}
    finally:
        server.terminate()
        server.wait(20)


async def test_a_reset_waiting_past_the_ttl_for_a_one_at_a_time_environment_keeps_its_slot() -> None:
    """OpenEnv's default serves one session at a time: a reset waits for the live one. Waiting
    past the idle TTL, its session was swept mid-reset; the reset then took the slot for a
    session already gone, and every later reset waited forever."""
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics.ecosystems.openenv import openenv_server as served

    lock = envs()
    lock.SoloEnvironment.most = lock.SoloEnvironment.live = 0
    turn = {"output": [{"type": "function_call", "name": "step", "call_id": "c", "arguments": '{"dial": 0, "value": 0}'}]}
    row = {"openenv": {"reset": {"seed": 1}}, "responses_create_params": {"input": "open it"}}
    async with serve_environment(served(lock.SoloEnvironment), session_ttl_s=0.5) as server, ResourcesClient(server.address) as client:
        first, _ = await client.reset_session(row)
        waiting = asyncio.ensure_future(client.reset_session(row))
        for _ in range(4):  # the first stays in use past the TTL while the second's reset waits
            await asyncio.sleep(0.3)
            await client.step(first, turn)
        assert not waiting.done()
        assert await client.close_session(first) is True
        second, _ = await asyncio.wait_for(waiting, 10)
        await client.step(second, turn)  # its session is live
        assert await client.close_session(second) is True
        third, _ = await asyncio.wait_for(client.reset_session(row), 10)  # the slot was given back
        assert await client.close_session(third) is True
    assert lock.SoloEnvironment.most == 1 and lock.SoloEnvironment.live == 0
