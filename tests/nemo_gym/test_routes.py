"""A ported environment's tool calls and verify answer as FastAPI answers them under NeMo Gym:
tests/nemo_gym/envs/routes_env (NeMo Gym's own form, ported here by the import rule) against
what NeMo Gym 0.7.0 answered (tests/data/nemo_gym_routes, recorded by
scripts/make_nemo_routes_reference.py): a catch-all route with a path parameter, HTTPExceptions,
bodies that do not fit (422), a bare str, an exception (500 with its repr), `response_model=`,
a tool named like a NeMo Gym route, and a verify whose base-class annotation filters the
subclass it returns. Every output byte for byte, every verify answer key for key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.nemo_gym.port import port_folder
from gym_metrics.testing import serve_environment

HERE = Path(__file__).parent
RECORDED = json.loads((HERE.parent / "data" / "nemo_gym_routes" / "episodes.json").read_text())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("ported") / "routes_env"
    port_folder(HERE / "envs" / "routes_env", folder)
    return load_config_server(folder / "configs" / "routes_env.yaml")


async def test_tool_calls_and_verify_answer_as_under_nemo_gym(server: Any) -> None:
    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        info = await client.server_info()
        assert info.any_tool_name  # the catch-all answers names that are not listed
        assert [t["name"] for t in info.tools] == ["lookup", "greet", "explode", "small"]  # NeMo Gym's routes and `/{name}` are not tools
        for episode in RECORDED["episodes"]:
            session = await client.seed_session(episode["row"])
            for call in episode["calls"]:
                got = await client.call_tool(session, call["name"], call["arguments"])
                assert (got.output, got.failed) == (call["output"], call["status"] >= 400), call
            verified = await client.verify(episode["row"] | {"response": RECORDED["response"]}, session_id=session)
            assert verified == episode["verify"]  # calls_seen and secret_detail filtered out by `-> BaseVerifyResponse`
        assert len(running.handler.sessions.store) == 0


async def test_a_session_that_ends_is_closed_as_nemo_gyms_contract_says(server: Any) -> None:
    """close_resources_session gets POST /close_session when a session ends, by verify or by a
    close, with the session's id as resources_session_id (= its request.session id)."""
    server.closed.clear()
    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        verified = await client.seed_session({"responses_create_params": {"input": "a"}})
        await client.verify({"responses_create_params": {"input": "a"}, "response": RECORDED["response"]}, session_id=verified)
        closed = await client.seed_session({"responses_create_params": {"input": "b"}})
        await client.close_session(closed)
    assert server.closed == [(verified, verified), (closed, closed)]


async def test_collect_calls_names_only_the_catch_all_answers(server: Any, tmp_path: Path) -> None:
    """The agent loop sends a name no route lists (`sin`) to the server, which routes it (the
    client used to refuse it: "no tool 'sin' in this environment")."""
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

    prompt = "sine of a half"
    steps = [PolicyAnswer(tool_calls=[{"name": "sin", "arguments": {"x": 0.5}}]), PolicyAnswer(text="0.479")]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"agent_ref": {"name": "agent"}, "responses_create_params": {"input": prompt}}) + "\n")
    with ScriptedPolicyServer({prompt: steps}) as policy:
        async with serve_environment(server) as running, ResourcesClient(running.address) as client:
            opts = CollectOptions(target=ModelTargetConfig(url=policy.url, model="scripted", api="responses"))
            result = await collect_async(client, rows, tmp_path / "out.jsonl", opts)
    [row] = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    outputs = [i["output"] for i in row["response"]["output"] if i["type"] == "function_call_output"]
    assert outputs == ['{"function":"sin","value":0.479426}'] and row["reward"] == 1.0
    assert (result.tool_calls, result.failed_tool_calls) == (1, 0)
