"""evaluate's agent loop: a model target's generation is an episode over an environment's tools
(`tools=ToolEnvironment(address)`, `evaluate --tools-server`), and the trajectory is what the
scorer reads: tool_call_accuracy sees every call the loop made, with the tool outputs between."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.evaluation import ToolEnvironment, evaluate_async
from gym_metrics.errors import InvalidInputError
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

sys.path.insert(0, str(Path(__file__).parents[1]))
from _tool_envs import Counter  # noqa: E402

pytestmark = pytest.mark.timeout(60)


def call(name: str, arguments: dict[str, Any]) -> PolicyAnswer:
    return PolicyAnswer(tool_calls=[{"name": name, "arguments": arguments}])


SCRIPT = {
    "add 2 then read": [call("increment_counter", {"count": 2}), call("get_counter_value", {}), PolicyAnswer(text="It is 2.")],
    "add 5 then read": [call("increment_counter", {"count": 4}), call("get_counter_value", {}), PolicyAnswer(text="It is 4.")],
}
ROWS = [
    {"user_input": [{"type": "human", "content": "add 2 then read"}], "initial_count": 0,
     "reference_tool_calls": [{"name": "increment_counter", "args": {"count": 2}}, {"name": "get_counter_value", "args": {}}]},
    {"user_input": [{"type": "human", "content": "add 5 then read"}], "initial_count": 0,
     "reference_tool_calls": [{"name": "increment_counter", "args": {"count": 5}}, {"name": "get_counter_value", "args": {}}]},
]  # fmt: skip


async def test_the_scorer_reads_the_whole_trajectory() -> None:
    with ScriptedPolicyServer(SCRIPT) as policy:
        async with serve_environment(Counter()) as server:
            target = {"type": "model", "url": policy.url, "model": "policy", "api": "responses"}
            result = await evaluate_async("tool_call_accuracy", ROWS, target=target, tools=ToolEnvironment(server.address))
            assert len(server.handler.sessions.store) == 0  # each episode's session was closed
    scores = [row["scores"]["tool_call_accuracy"] for row in result.row_scores]
    assert scores[0] == 1.0 and 0.0 < scores[1] < 1.0  # the second adds the wrong number
    assert len(policy.requests) == 6  # three policy turns per row
    second_turn = policy.requests_for("add 2 then read")[1].body["input"]  # the tool's output went back to the policy
    assert second_turn[-1] == {"type": "function_call_output", "call_id": "call_0", "output": '{"success":true}'}
    assert [t["name"] for t in policy.requests[0].body["tools"]] == ["increment_counter", "get_counter_value", "explode"]


async def test_tools_need_a_target() -> None:
    with pytest.raises(InvalidInputError, match="tools go with a target"):
        await evaluate_async("tool_call_accuracy", ROWS, tools=ToolEnvironment("127.0.0.1:1"))


async def test_an_unreachable_tools_server_is_the_runs_error_not_every_rows() -> None:
    from gym_metrics._transport.client import ServerUnreachableError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens once closed
    with ScriptedPolicyServer(SCRIPT) as policy:
        target = {"type": "model", "url": policy.url, "model": "policy", "api": "responses"}
        started = time.monotonic()
        with pytest.raises(ServerUnreachableError, match=f"cannot reach the server at 127.0.0.1:{port}"):
            # (a 1 s connect timeout: a refused address is retried that long, the default's 5 s proves no more)
            await evaluate_async("tool_call_accuracy", ROWS * 50, target=target, tools=ToolEnvironment(f"127.0.0.1:{port}", connect_timeout=1.0))
        assert time.monotonic() - started < 20  # once for the run: not 100 rows' connection attempts
        assert policy.requests == []  # no generation for a run that cannot have its episodes
