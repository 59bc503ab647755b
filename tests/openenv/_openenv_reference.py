"""The reference for the OpenEnv tests: OpenEnv's own server (`create_app`, under uvicorn on
127.0.0.1, port 0) and its own client (`GenericEnvClient`, over its WebSocket), playing the same
actions; what the model would read of each observation, by the rule docs/environments.md#openenv
states; and OpenEnv itself, required where GYM_METRICS_NEED_OPENENV=1 (.ci/run's OpenEnv stage)
and skipped elsewhere (it cannot share a venv with the mcp extra: fastmcp 3 pins mcp < 2).

The gym-metrics side too: the rows `collect` reads, the CLI run in process against a real gRPC
server with a scripted policy over HTTP, a policy that answers each task turn by turn, what the
model read back, and the comparison of one collected episode with the client's."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import pytest

from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

NOT_SHOWN = ("reward", "done", "metadata")
MAX_STEPS = 8
REFUSED = ("Invalid action:", "the episode has ended")
"""How the answers that are no observation begin: an action that was not sent, one past the end."""


def need_openenv() -> None:
    try:
        import openenv.core.env_server  # noqa: F401
    except ImportError as exc:
        if os.environ.get("GYM_METRICS_NEED_OPENENV") == "1":
            pytest.fail(f"openenv is not importable ({exc}): .ci/run's OpenEnv stage installs it", pytrace=False)
        pytest.skip(f"openenv is not installed ({exc}): pip install 'gym-metrics[openenv]'")


@contextlib.contextmanager
def openenv_server(env: Any, action: type, observation: type, sessions: int = 8) -> Iterator[str]:
    """OpenEnv's own server for `env` on a free loopback port; its base URL."""
    import uvicorn
    from openenv.core.env_server.http_server import create_app

    app = create_app(env, action, observation, env_name="reference", max_concurrent_envs=sessions)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", ws="websockets"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "OpenEnv's server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


async def client_episode(url: str, reset: dict[str, Any], actions: list[dict[str, Any]], *, list_tools: bool = False) -> dict[str, Any]:
    """OpenEnv's client plays `actions` from a reset with `reset`, stopping when one is done (the
    reset too: a game already over): what it received (reset, each step as {observation,
    reward, done}) and the state after.
    `list_tools`: first list an MCP environment's tools, as OpenEnv's MCPToolClient does before
    its first call (a ListToolsAction step, not counted among the steps)."""
    from openenv.core.generic_client import GenericEnvClient

    async with GenericEnvClient(base_url=url) as client:
        first = await client.reset(**reset)
        if list_tools:
            await client.step({"type": "list_tools"})
        steps = []
        for action in actions if not first.done else ():
            result = await client.step(action)
            steps.append({"observation": result.observation, "reward": result.reward, "done": bool(result.done)})
            if result.done:
                break
        state = await client.state()
    return {"reset": {"observation": first.observation, "reward": first.reward, "done": bool(first.done)}, "steps": steps, "state": state}


def shown(observation: dict[str, Any]) -> str:
    """What the model reads of an observation as OpenEnv's client holds it (the rule the docs
    state: the one text field alone, else the fields as JSON; an MCP call's result as its text)."""
    if "tool_name" in observation and "result" in observation:
        if observation.get("error"):
            return f"Error: {observation['error']['message']}"
        data = observation["result"].get("data")
        return data if isinstance(data, str) else json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    fields = {k: v for k, v in observation.items() if k not in NOT_SHOWN}
    if len(fields) == 1 and isinstance(next(iter(fields.values())), str):
        return str(next(iter(fields.values())))
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False) if fields else ""


def task(index: int, prompt: str, reset: dict[str, Any] | None = None) -> dict[str, Any]:
    """A task row for collect: its prompt, and OpenEnv's reset keyword arguments when given."""
    row: dict[str, Any] = {"responses_create_params": {"input": [{"role": "user", "content": prompt}]}, "agent_ref": {"name": "policy"},
                           "_ng_task_index": index, "_ng_rollout_index": 0}  # fmt: skip
    if reset is not None:
        row["openenv"] = {"reset": reset}
    return row


async def collect(tmp_path: Path, server_class: Any, rows: list[dict[str, Any]], policy: Any, *extra: str, max_steps: int = MAX_STEPS) -> dict[int, dict[str, Any]]:
    """`gym-metrics collect` run in process: `server_class` served over gRPC, `policy` answering
    over HTTP (by the conversation so far); the rows written, by task index."""
    from gym_metrics.cli import main as cli_main

    run = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
    run.mkdir()
    (run / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    async with serve_environment(server_class) as server:
        with ScriptedPolicyServer(policy, by_conversation=True) as scripted:
            args = ["collect", "--server", server.address, "--input", str(run / "tasks.jsonl"), "--output", str(run / "out.jsonl"),
                    "--policy-url", scripted.url, "--policy-model", "scripted", "--max-steps", str(max_steps), *extra]  # fmt: skip
            assert await asyncio.to_thread(cli_main, args) == 0
    return {row["_ng_task_index"]: row for row in map(json.loads, (run / "out.jsonl").read_text().splitlines())}


@dataclass(frozen=True)
class Turn:
    """One scripted turn: what the policy answers, and the OpenEnv actions the test means it to
    carry, in order (none: a turn gym-metrics should refuse)."""

    answer: Union[str, PolicyAnswer]
    actions: tuple[dict[str, Any], ...] = field(default=())


Plan = Union[Sequence[Any], Callable[[str, int], Any]]
"""A task's turns: a list of answers, or a function of the conversation so far and the turn's
number (a policy that reads its observations)."""


def turns_policy(plans: Mapping[str, Plan], played: dict[str, list[Any]] | None = None) -> Callable[[str], Any]:
    """Answers each task (known by its prompt, the first user message) with its plan's next turn
    (a `Turn` answers its `answer`); `played` collects each task's turns as answered. A task's
    turns come one after another, so the calls made for it count its turns."""
    made: dict[str, int] = {}

    def answer(conversation: str) -> Any:
        prompt = conversation.split("\n")[0]
        turn = made[prompt] = made.get(prompt, -1) + 1
        plan = plans[prompt]
        if callable(plan):
            chosen = plan(conversation, turn)
        else:
            chosen = plan[turn] if turn < len(plan) else "out of ideas"
        if played is not None:
            played.setdefault(prompt, []).append(chosen)
        return chosen.answer if isinstance(chosen, Turn) else chosen

    return answer


def read_back(row: dict[str, Any]) -> list[str]:
    """What the model read after each of its turns: the observation message, or the tool outputs."""
    out = []
    for item in row["response"]["output"]:
        if item.get("role") == "user":
            out.append(item["content"])
        elif item.get("type") == "function_call_output":
            out.append(item["output"])
    return out


def assert_plays_as_client(row: dict[str, Any], ref: dict[str, Any], context: Any = None, drawn: Sequence[str] = ()) -> None:
    """One collected episode is the episode OpenEnv's client played with the same actions: the
    reset the model read first, the rewards summed, `terminated` the last step's done (the
    reset's, when the client took no step), what the
    model read turn for turn (refusals aside; the last turn's observations, which the loop stops
    before reading, from its `info["openenv"]`), the last step as the client received it, and the
    state at the end. `drawn`: state fields the environment draws afresh for each instance (a
    uuid4 episode id), which no two servers share."""
    first = shown(ref["reset"]["observation"])
    given = row["responses_create_params"]["input"]
    assert (given[-1]["content"] if len(given) > 1 else "") == first, context
    assert row["reward"] == pytest.approx(sum(s["reward"] or 0.0 for s in ref["steps"])), context
    assert row["terminated"] is (ref["steps"] or [ref["reset"]])[-1]["done"], context
    taken = [text for text in read_back(row) if not text.startswith(REFUSED)]
    if row["terminated"]:  # the last turn's observations are not read (NeMo Gym's loop stops first): its info has them
        taken += [shown(r["observation"]) for r in row["info"]["openenv"]]
        assert row["info"]["openenv"][-1:] == ref["steps"][-1:], context  # as the client received it, reward and done included
        state, theirs = dict(row["info"]["state"]), dict(ref["state"])
        for name in drawn:
            assert isinstance(state.pop(name), str) and isinstance(theirs.pop(name), str), (context, name)
        assert state == theirs, context
    assert taken == [shown(s["observation"]) for s in ref["steps"]], context
