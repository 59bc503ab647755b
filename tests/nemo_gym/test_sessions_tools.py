"""NeMo Gym's stateful tool environments (example_session_state_mgmt: a counter seeded per session;
example_single_tool_call: weather), ported by their imports and served from their config: each
recorded episode of NeMo Gym's simple_agent (tests/data/nemo_gym_agent, recorded by
scripts/make_nemo_agent_reference.py) replayed through SeedSession, CallTool and Verify in the
session gives NeMo Gym's tool outputs, byte for byte, and its reward."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.testing import serve_environment

DATA = Path(__file__).parents[1] / "data" / "nemo_gym_agent"
ENVS = ["example_session_state_mgmt", "example_single_tool_call"]

pytestmark = pytest.mark.slow


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("env", ENVS)
async def test_recorded_episodes_replay_to_nemo_gyms_outputs_and_rewards(env: str, ported: Any) -> None:
    meta = json.loads((DATA / env / "meta.json").read_text())
    config = ported.folder(env) / "configs" / Path(meta["config_file"]).name
    server = load_config_server(config, name=meta["resources_server_instance"])
    rows, episodes, answers = (_read(DATA / env / name) for name in ("rows.jsonl", "episodes.jsonl", "verify.jsonl"))
    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        info = await client.server_info()
        called = {c["name"] for e in episodes for c in e["tool_calls"]}
        assert called <= {t["name"] for t in info.tools}
        for row, episode, answer in zip(rows, episodes, answers):
            session = await client.seed_session(row)
            for call in episode["tool_calls"]:
                got = await client.call_tool(session, call["name"], call["arguments"])
                assert (got.output, got.failed) == (call["output"], False), (row["_ng_task_index"], call)
            body = {k: v for k, v in row.items() if k != "agent_ref"} | {"response": answer["response"]}
            verified = await client.verify(body, session_id=session)
            assert verified["reward"] == answer["reward"] == episode["reward"]
        assert len(running.handler.sessions.store) == 0  # every verify ended its session


async def test_a_tool_named_like_a_liveness_route_answers_as_under_nemo_gym(ported: Any) -> None:
    """NeMo Gym's run_webserver adds GET /health, /healthz, /livez, /readyz and / to every
    server: a model's call of `health` (a POST) answers 405 there, where a route-less name is
    404; without a catch-all route here it was 404. Through a catch-all both reach the catch-all."""
    meta = json.loads((DATA / "example_single_tool_call" / "meta.json").read_text())
    config = ported.folder("example_single_tool_call") / "configs" / Path(meta["config_file"]).name
    server = load_config_server(config, name=meta["resources_server_instance"])
    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        session = await client.seed_session({"responses_create_params": {"input": "hi"}})
        for name in ("health", "healthz", "livez", "readyz"):
            got = await client.call_tool(session, name, "{}")
            assert (got.output, got.failed, got.status) == ('{"detail":"Method Not Allowed"}', True, 405), name
        got = await client.call_tool(session, "sunshine", "{}")
        assert (got.output, got.failed, got.status) == ('{"detail":"Not Found"}', True, 404)  # the route's own status (CallTool's `status`)
        assert "health" not in {t["name"] for t in (await client.server_info()).tools}
