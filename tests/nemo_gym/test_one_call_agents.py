"""NeMo Gym's one-call agents run by `collect` as NeMo Gym 0.7.0 runs them, plain and observed
(tests/data/nemo_gym_one_call.json, scripts/make_nemo_one_call_reference.py):
`tool_simulation_agent` (one policy call, its answer verified, no session) and
`non_executing_simple_agent` (a session seeded, one policy call, a string `input` sent as a user
message, the answer verified in the session; its tool calls never run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment
from gym_metrics.testing._nemo_check import differences

from _ci import need_module
from _evidence import EVIDENCE, stable

pytestmark = pytest.mark.slow  # (as the other NeMo Gym conformance tests: the wheel's environments need Python 3.11+, StrEnum)

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_one_call.json").read_text())
AGENTS = ("tool_simulation_agent", "non_executing_simple_agent")
STAMPS = {"_ng_environment_server", "_ng_result_type"}
"""Stamped by collect from the relay NeMo Gym's collection puts in front of a flat agent (the
recording posted to the agent itself)."""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _key(row: dict[str, Any]) -> tuple[int, int]:
    return row["_ng_task_index"], row["_ng_rollout_index"]


def _config(ported: Any, case: dict[str, Any]) -> Path:
    path = ported.folder(case["env"]) / "configs" / f"{case['config']}.yaml"
    if case["config"] in REFERENCE["configs"]:
        path.write_text(REFERENCE["configs"][case["config"]])
    return path


async def _collect(case: dict[str, Any], config: Path, tmp_path: Path, name: str, trajectory: bool = False) -> list[dict[str, Any]]:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in case["rows"]))
    out = tmp_path / f"{name}.jsonl"
    policy = ScriptedPolicyServer({prompt: [PolicyAnswer(**step) for step in steps] for prompt, steps in case["policy"].items()})
    with policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        async with serve_environment(load_config_server(config)) as running, ResourcesClient(running.address) as client:
            await collect_async(client, rows, out, CollectOptions(target=target, trajectory=trajectory))
    return _lines(out)


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_one_call_agents_rollouts_are_nemo_gyms(agent: str, ported: Any, tmp_path: Path) -> None:
    """Each row's reward, response and verify fields equal NeMo Gym's answer to its `/run`
    (non_executing_simple_agent's last row scores 1 only in a seeded session)."""
    case = REFERENCE[agent]
    mine = {_key(r): r for r in await _collect(case, _config(ported, case), tmp_path, "out")}
    theirs = {_key(r): r for r in case["responses"]}
    assert set(mine) == set(theirs)
    for key, answer in theirs.items():
        ours = mine[key] | {"response": {k: v for k, v in mine[key]["response"].items() if k != "model"}}  # (the target names its model;
        theirs_ = answer | {"response": {k: v for k, v in answer["response"].items() if k != "model"}}  # NeMo Gym's recording sent none)
        assert differences(theirs_, {k: v for k, v in ours.items() if k not in STAMPS}, str(key)) == [], key
        assert set(mine[key]) == {*answer, *STAMPS}, key


@pytest.mark.parametrize("agent", AGENTS)
async def test_a_one_call_agents_observed_evidence_is_nemo_gyms(agent: str, ported: Any, tmp_path: Path) -> None:
    """With --trajectory (NeMo Gym's `observability_enabled`): the call as NeMo Gym's model server
    records it, under the agent's model server, and `ng_trajectory` projected from it alone (these
    agents give no trajectory of their own): every evidence field equals NeMo Gym's, clocks and
    generated ids aside."""
    case = REFERENCE[agent]
    mine = {_key(r): r for r in await _collect(case, _config(ported, case), tmp_path, "observed", trajectory=True)}
    theirs = {_key(r): r for r in case["observed"]}
    assert set(mine) == set(theirs)
    for key, answer in theirs.items():
        assert [p for p in EVIDENCE if p in answer] == [p for p in EVIDENCE if p in mine[key]], key
        assert set(mine[key]) == {*answer, *STAMPS}, key
        for part in (p for p in EVIDENCE if p in answer):
            assert differences(stable(answer[part], {}), stable(mine[key][part], {}), f"{key}.{part}") == []


async def test_a_one_call_agents_payloads_are_recorded_as_nemo_gyms_model_server_records_them(ported: Any, tmp_path: Path) -> None:
    """Payload capture alone (no trajectory): the calls under the agent's model server, each
    request as the agent posted it (tool_simulation_agent: the row's, unchanged) and each answer as
    the server's typed model dumps it, as in NeMo Gym's observed rows."""
    case = REFERENCE["tool_simulation_agent"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in case["rows"]))
    policy = ScriptedPolicyServer({prompt: [PolicyAnswer(**step) for step in steps] for prompt, steps in case["policy"].items()})
    with policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        async with serve_environment(load_config_server(_config(ported, case))) as running, ResourcesClient(running.address) as client:
            await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target, capture_payloads=True))
    theirs = {_key(r): r["ng_trajectory"]["model_calls"] for r in case["observed"]}  # (the payloads NeMo Gym's model server captured)
    for row in _lines(tmp_path / "out.jsonl"):
        assert "ng_trajectory" not in row
        for mine, recorded in zip(row["ng_model_call_capture"]["calls"], theirs[_key(row)], strict=True):
            assert mine["model_ref"] == {"type": "responses_api_models", "name": "policy_model"}
            assert (mine["request"], stable(mine["response"], {})) == (recorded["request"], stable(recorded["response"], {}))


@pytest.mark.parametrize("agent", AGENTS)
async def test_the_run_door_answers_a_one_call_agents_rows_as_nemo_gym(agent: str, ported: Any) -> None:
    """`serve --agent-http-port`'s `/run` (NeMo RL's door) runs a one-call agent's row as that
    agent does: non_executing_simple_agent's in a seeded session (its last row scores 1 only so)."""
    need_module("uvicorn", "pip install 'gym-metrics[http]': the door is served by uvicorn")
    import httpx

    case = REFERENCE[agent]
    policy = ScriptedPolicyServer({prompt: [PolicyAnswer(**step) for step in steps] for prompt, steps in case["policy"].items()})
    with policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        async with serve_environment(load_config_server(_config(ported, case)), agent_http_port=0, agent_target=target) as running:
            async with httpx.AsyncClient(timeout=60) as http:
                answers = [await http.post(f"http://127.0.0.1:{running.agent_http_port}/run", json=row) for row in case["rows"]]
            assert len(running.handler.sessions.store) == 0  # every session it seeded ended
    assert [a.status_code for a in answers] == [200] * len(case["rows"])
    assert [a.json()["reward"] for a in answers] == [r["reward"] for r in case["responses"]]
