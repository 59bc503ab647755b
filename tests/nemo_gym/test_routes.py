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
from gym_metrics.nemo_gym.base_resources_server import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.nemo_gym.base_resources_server import SimpleResourcesServer as NeMoGymServer
from gym_metrics.nemo_gym.port import port_folder
from gym_metrics.testing import serve_environment

HERE = Path(__file__).parent
RECORDED = json.loads((HERE.parent / "data" / "nemo_gym_routes" / "episodes.json").read_text())


class Scored(BaseVerifyResponse):
    score: float


class NotANumber(NeMoGymServer):
    """Its verify answers NaN and infinity, which NeMo Gym's JSON answer refuses."""

    async def verify(self, body: BaseVerifyRequest) -> Scored:
        return Scored(**body.model_dump(), reward=float("nan"), score=float("inf"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("ported") / "routes_env"
    port_folder(HERE / "envs" / "routes_env", folder)
    return load_config_server(folder / "configs" / "routes_env.yaml")


async def test_tool_calls_and_verify_answer_as_under_nemo_gym(server: Any) -> None:
    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        info = await client.server_info()
        assert info.any_tool_name  # the catch-all answers names that are not listed
        assert [t["name"] for t in info.tools] == ["lookup", "greet", "explode", "small", "lifespan"]  # NeMo Gym's routes and `/{name}` are not tools
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


async def test_collect_sends_a_nemo_gym_apps_rows_as_they_are(server: Any, tmp_path: Path) -> None:
    """NeMo Gym's simple_agent sends the row's request as it is: its routes are not added as
    `tools` to a row without them (`tools: []` reached the model as the environment's list), and
    arguments it cannot encode (an integer past 64 bits: orjson raises, its /run fails) fail
    the rollout, never a silently scored one."""
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

    script = {
        "plain": [PolicyAnswer(tool_calls=[{"name": "sin", "arguments": {"x": 0.5}}]), PolicyAnswer(text="0.479")],
        "huge": [PolicyAnswer(tool_calls=[{"name": "sin", "arguments": '{"x": 123456789012345678901234567890}'}]), PolicyAnswer(text="?")],
    }
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"agent_ref": {"name": "agent"}, "responses_create_params": {"input": p, **extra}}) + "\n"
                            for p, extra in (("plain", {"tools": []}), ("plain", {}), ("huge", {}))))  # fmt: skip
    with ScriptedPolicyServer(script) as policy:
        async with serve_environment(server) as running, ResourcesClient(running.address) as client:
            opts = CollectOptions(target=ModelTargetConfig(url=policy.url, model="scripted", api="responses"))
            result = await collect_async(client, rows, tmp_path / "out.jsonl", opts)
    assert all(not r.body.get("tools") for r in policy.requests), [r.body.get("tools") for r in policy.requests]
    written = {json.loads(line)["_ng_task_index"]: json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()}
    assert written[0]["reward"] == written[1]["reward"] == 1.0
    error = written[2]["_gm_error"]
    assert error["kind"] == "invalid_request" and "call sin: arguments" in error["message"] and "64-bit" in error["message"], error
    assert result.verified == 3 and "reward" not in written[2]


AGENTS_YAML = """
routes_env:
  resources_servers:
    routes_env:
      entrypoint: app.py
      domain: other
routes_env_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      max_steps: 2
      resources_server: {type: resources_servers, name: routes_env}
      model_server: {type: responses_api_models, name: policy_model}
patient_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      max_steps: 3
      resources_server: {type: resources_servers, name: routes_env}
simulated_agent:
  responses_api_agents:
    tool_simulation_agent:
      entrypoint: app.py
      resources_server: {type: resources_servers, name: routes_env}
elsewhere_agent:
  responses_api_agents:
    simple_agent:
      max_steps: 1
      resources_server: {type: resources_servers, name: another_env}
"""


@pytest.mark.parametrize("given", [None, 1])
async def test_collect_stops_episodes_at_the_configs_max_steps(server: Any, tmp_path: Path, given: int | None, capsys: pytest.CaptureFixture[str]) -> None:
    """A NeMo Gym config's agent block says its episodes' `max_steps` (simple_agent stops there);
    served from that config, collect bounds each row's episode by its agent's (it ran unbounded
    without `--max-steps`, and its rows and metrics differed from NeMo Gym's). `--max-steps`
    comes first; an agent the config does not name gets none when its agents disagree. A
    tool_simulation_agent's row is one policy call whose tool calls are not run."""
    from gym_metrics.collector import CollectOptions, collect_async
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

    folder = tmp_path / "ported" / "routes_env"
    port_folder(HERE / "envs" / "routes_env", folder)
    (folder / "configs" / "agents.yaml").write_text(AGENTS_YAML)
    env = load_config_server(folder / "configs" / "agents.yaml", name="routes_env")
    script = {"spin": [PolicyAnswer(tool_calls=[{"name": "sin", "arguments": {"x": 0.5}}])] * 4 + [PolicyAnswer(text="done")]}
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"agent_ref": {"name": a}, "responses_create_params": {"input": "spin"}}) + "\n"
                            for a in ("routes_env_agent", "patient_agent", "stranger", "simulated_agent")))  # fmt: skip
    with ScriptedPolicyServer(script) as policy:
        async with serve_environment(env) as running, ResourcesClient(running.address) as client:
            info = await client.server_info()
            opts = CollectOptions(target=ModelTargetConfig(url=policy.url, model="scripted", api="responses"), max_steps=given)
            result = await collect_async(client, rows, tmp_path / "out.jsonl", opts)
    warned = [line for line in capsys.readouterr().err.splitlines() if "is not an agent of the served config" in line]
    assert len(warned) == 1 and "agent 'stranger' is not an agent of the served config: its agents are patient_agent, routes_env_agent, simulated_agent" in warned[0]
    assert info.agent_max_steps == {"routes_env_agent": 2, "patient_agent": 3}
    assert info.agent_types == {"routes_env_agent": "simple_agent", "patient_agent": "simple_agent", "simulated_agent": "tool_simulation_agent"}
    written = {r["agent_ref"]["name"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    calls = {a: sum(i["type"] == "function_call" for i in r["response"]["output"]) for a, r in written.items()}
    assert calls == ({"routes_env_agent": 2, "patient_agent": 3, "stranger": 4, "simulated_agent": 1} if given is None else dict.fromkeys(written, 1))
    assert [i["type"] for i in written["simulated_agent"]["response"]["output"]] == ["function_call"]  # not run
    assert result.tool_calls == (9 if given is None else 3)
    assert result.episodes_at_max_steps == (2 if given is None else 3)
    assert {a for a, r in written.items() if r.get("_gm_stop_reason") == "max_steps"} == ({"routes_env_agent", "patient_agent"} if given is None else set(written) - {"simulated_agent"})


def test_an_agent_the_config_does_not_name_takes_the_bound_its_agents_share(tmp_path: Path) -> None:
    from gym_metrics._transport.client import ServerInfo
    from gym_metrics.errors import InvalidInputError

    def info(steps: dict[str, int]) -> ServerInfo:
        return ServerInfo("e", "v", [], {}, {}, False, [], agent_max_steps=steps)

    assert [info(s).max_steps_of("stranger") for s in ({"a": 2, "b": 2}, {"a": 2, "b": 3}, {})] == [2, None, None]
    assert info({"a": 2, "b": 3}).max_steps_of("b") == 3
    folder = tmp_path / "routes_env"
    port_folder(HERE / "envs" / "routes_env", folder)
    (folder / "configs" / "bad.yaml").write_text(AGENTS_YAML.replace("max_steps: 3", "max_steps: three"))
    with pytest.raises(InvalidInputError, match="bad max_steps") as caught:
        load_config_server(folder / "configs" / "bad.yaml", name="routes_env")
    assert "patient_agent.max_steps" in str(caught.value) and "'three' is not a whole number" in str(caught.value)


async def test_a_ported_verify_answering_nan_fails_its_rollout_as_under_nemo_gym() -> None:
    """NeMo Gym's JSON answer refuses NaN and infinities (allow_nan=False: its /verify answers
    500 and the rollout fails); a ported environment's was written as null, its reward left out
    of the stats uncounted. Now it fails, naming the fields."""
    from gym_metrics.environments import VERIFY_FAILED, EnvironmentHandler
    from gym_metrics.nemo_gym.base_resources_server import BaseResourcesServerConfig

    env = NotANumber(config=BaseResourcesServerConfig(name="nan", host="127.0.0.1", port=0, entrypoint="app.py"))
    handler = EnvironmentHandler(env)
    results: dict[int, tuple[str | None, str]] = {}
    row = json.dumps({"responses_create_params": {"input": "x"}, "response": RECORDED["response"]})
    await handler.verify_batch([row], lambda i, reward, response, kind, message: results.__setitem__(i, (kind, message)), handler.slots(), lambda i: (i, 0))
    assert results[0][0] == VERIFY_FAILED and "verify() returned reward=nan, score=inf; NeMo Gym's answer cannot carry NaN" in results[0][1]
