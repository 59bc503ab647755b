"""The agent loop of `collect` against NeMo Gym's simple_agent: the wheel's self-contained tool
environments, ported by their imports, served from their config, collected multi-turn with the
same policy as NeMo Gym's recording (tests/data/nemo_gym_agent,
scripts/make_nemo_agent_reference.py, whose NOT_REPLAYED lists the others and why): a scripted
one for example_session_state_mgmt, example_single_tool_call, math_advanced_calculations,
workplace_assistant (27 tools behind a catch-all route over five databases a session; several
calls of one turn that change and read the same tables, unknown tools, null and unexpected
arguments) and indirect_prompt_injection (sessions seeded with each row's records; a catch-all
route named `route_tool_call`, like a gym-metrics hook: test_hook_names.py), and for example_multi_step,
example_tool_call_multireward and xlam_fc one that replays the model turns of their recorded
data/example_rollouts.jsonl; math_with_code (a Python process a session: calls of one turn that
depend on each other) and citation_if (a catch-all route answering in plain text, max_steps 1);
single_step_tool_use_with_argument_comparison, whose config runs it with NeMo Gym's
tool_simulation_agent (one policy call, no tool run, no session); litmus_agent, its code tool on
NeMo Gym's `local` sandbox provider (NeMo Gym ran the cells on the host; here they run in
gym-metrics' sandbox, state carried between calls by replayed cells). Every rollout's trajectory
(items and order, every tool output's text), usage and reward, and every key of the metrics
file equal NeMo Gym's; over the chat API every item's type, tool name, arguments, output and
text, and the reward. NeMo RL's door (`serve --agent-http-port`, POST /run) answers each row as
NeMo Gym's agent answered it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

sys.path.insert(0, str(Path(__file__).parents[1] / "aggregate"))
from test_nemo_conformance import compare_files  # noqa: E402

from _ci import need_module, need_sandbox  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "nemo_gym_agent"
ENVS = ["example_session_state_mgmt", "example_single_tool_call", "example_multi_step", "example_tool_call_multireward", "xlam_fc",
        "math_advanced_calculations", "workplace_assistant", "indirect_prompt_injection", "math_with_code", "citation_if",
        "single_step_tool_use_with_argument_comparison", "litmus_agent"]  # fmt: skip
CONFIGS = {"litmus_agent": Path(__file__).parents[1] / "data" / "nemo_gym_sandbox" / "litmus_agent_local.yaml"}
"""Environments recorded under a config of ours (make_nemo_agent_reference.CONFIGS): litmus_agent's
code tool on NeMo Gym's `local` provider, here in gym-metrics' sandbox (bubblewrap needed)."""
PACKAGES = {
    "workplace_assistant": ("pandas", "pip install pandas==3.1.1, the version its reference was recorded with: its tools keep their databases in it"),
    "math_with_code": ("pandas", "pip install pandas==3.1.1: its module imports it (the model's code may use it)"),
}
"""The PyPI packages an environment's own code imports (its requirements.txt names none of them)."""
NOT_COMPARED = {"model"}
"""The policy's model name: the target sends its own (NeMo Gym's recording sent none)."""

pytestmark = pytest.mark.slow


def _read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def scripted_policy(env: str) -> ScriptedPolicyServer:
    script = json.loads((DATA / env / "policy.json").read_text())
    return ScriptedPolicyServer({prompt: [PolicyAnswer(**step) for step in steps] for prompt, steps in script.items()})


def environment(env: str, ported: Any) -> Any:
    """The env's resources server, from its config as NeMo Gym's recording built it (its
    packages present, or the test skips naming them)."""
    if env in PACKAGES:
        need_module(*PACKAGES[env])
    meta = json.loads((DATA / env / "meta.json").read_text())
    config = ported.folder(env) / "configs" / Path(meta["config_file"]).name
    if env in CONFIGS:
        need_sandbox()
        config.write_text(CONFIGS[env].read_text())
    return load_config_server(config, name=meta["resources_server_instance"])


@pytest.mark.parametrize("api", ["responses", "chat"])
@pytest.mark.parametrize("env", ENVS)
async def test_collect_runs_nemo_gyms_episodes(env: str, api: str, ported: Any, tmp_path: Path) -> None:
    server = environment(env, ported)
    with scripted_policy(env) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api=api)  # type: ignore[arg-type]
        async with serve_environment(server) as running, ResourcesClient(running.address) as client:
            result = await collect_async(client, DATA / env / "rows.jsonl", tmp_path / "out.jsonl", CollectOptions(target=target))
            assert len(running.handler.sessions.store) == 0  # every episode's session ended
    written, expected = _read(tmp_path / "out.jsonl"), _read(DATA / env / "verify.jsonl")
    episodes = _read(DATA / env / "episodes.jsonl")
    assert len(written) == len(expected) and result.generation_failed == 0
    assert result.tool_calls == sum(c["output"] is not None for e in episodes for c in e["tool_calls"])  # (a one-call agent runs none)
    by_key = {_key(row): row for row in written}  # written as episodes finish, not in input order
    rows = [by_key[_key(row)] for row in _read(DATA / env / "rows.jsonl")]
    for i, (ours, theirs) in enumerate(zip(rows, expected)):
        assert ours["reward"] == theirs["reward"], i
        if api == "chat":  # ids and token details are the chat endpoint's, not the Responses one's
            assert [_call(o) for o in ours["response"]["output"]] == [_call(o) for o in theirs["response"]["output"]], i
            continue
        mine = {k: v for k, v in ours["response"].items() if k not in NOT_COMPARED}
        assert mine == {k: v for k, v in theirs["response"].items() if k not in NOT_COMPARED}, i
    if api == "responses":
        reference = json.loads((DATA / env / "aggregate_metrics.json").read_text())
        assert compare_files(reference, json.loads(result.metrics_path.read_text())) is None


def _key(row: dict[str, Any]) -> tuple[int, int]:
    return row["_ng_task_index"], row["_ng_rollout_index"]


def _call(item: dict[str, Any]) -> tuple[Any, ...]:
    """What an item says, whatever API carried it: its type, tool name, arguments, output, text."""
    text = "".join(c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict))
    return item["type"], item.get("name"), item.get("arguments"), item.get("output"), text


@pytest.mark.parametrize("env", ENVS)
async def test_the_run_door_answers_as_nemo_gyms_agent(env: str, ported: Any) -> None:
    need_module("uvicorn", "pip install 'gym-metrics[http]': the door is served by uvicorn")
    import httpx

    server = environment(env, ported)
    with scripted_policy(env) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")  # type: ignore[arg-type]
        async with serve_environment(server, agent_http_port=0, agent_target=target) as running:
            async with httpx.AsyncClient(timeout=60) as http:
                answers = [await http.post(f"http://127.0.0.1:{running.agent_http_port}/run", json=row) for row in _read(DATA / env / "rows.jsonl")]
            assert len(running.handler.sessions.store) == 0
    for i, (answer, theirs) in enumerate(zip(answers, _read(DATA / env / "verify.jsonl"), strict=True)):
        assert answer.status_code == 200, answer.text
        ours = answer.json()
        assert ours["reward"] == theirs["reward"], i
        mine = {k: v for k, v in ours["response"].items() if k not in NOT_COMPARED}
        assert mine == {k: v for k, v in theirs["response"].items() if k not in NOT_COMPARED}, i
