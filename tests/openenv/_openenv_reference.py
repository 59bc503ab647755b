"""The reference for the OpenEnv tests: OpenEnv's own server (`create_app`, under uvicorn on
127.0.0.1, port 0) and its own client (`GenericEnvClient`, over its WebSocket), playing the same
actions; what the model would read of each observation, by the rule docs/environments.md#openenv
states; and OpenEnv itself, required where GYM_METRICS_NEED_OPENENV=1 (.ci/run's OpenEnv stage)
and skipped elsewhere (it cannot share a venv with the mcp extra: fastmcp 3 pins mcp < 2)."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

NOT_SHOWN = ("reward", "done", "metadata")


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


async def client_episode(url: str, reset: dict[str, Any], actions: list[dict[str, Any]]) -> dict[str, Any]:
    """OpenEnv's client plays `actions` from a reset with `reset`, stopping when one is done:
    what it received (reset, each step as {observation, reward, done}) and the state after."""
    from openenv.core.generic_client import GenericEnvClient

    async with GenericEnvClient(base_url=url) as client:
        first = await client.reset(**reset)
        steps = []
        for action in actions:
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
        return data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    fields = {k: v for k, v in observation.items() if k not in NOT_SHOWN}
    if len(fields) == 1 and isinstance(next(iter(fields.values())), str):
        return str(next(iter(fields.values())))
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=False) if fields else ""
