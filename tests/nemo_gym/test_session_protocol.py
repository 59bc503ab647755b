"""NeMo Gym's session protocol (`single_agent_turn_legacy` in front of simple_agent's agent
sessions) run by `collect` as NeMo Gym 0.7.0 runs it: the wheel's own example
(example_single_tool_call_single_agent_turn.yaml), the same rows and scripted policy as NeMo Gym's
recording (tests/data/nemo_gym_session_protocol.json, scripts/make_nemo_session_protocol_reference.py).
Each row is stamped with the environment server the config puts in front of its agent and that
server's type; an episode that fails at the agent's step is the server's failure row in the
failures sidecar (`environment_server_failed`, stage `agent`, not terminal, nothing echoed), which
`--resume` runs again; the metrics are NeMo Gym's."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import environment_servers_of, load_config_server
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment
from gym_metrics.testing._nemo_check import differences

from _evidence import EVIDENCE, stable

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "nemo_gym_session_protocol.json").read_text())
SERVER = ("example_single_tool_call_single_agent_turn", "single_agent_turn_legacy")
STAMPS = ("_ng_environment_server", "_ng_result_type")
FAILURE_FIELDS = ("_ng_failure_class", "_ng_failure_terminal", "_ng_failure_stage", "agent_ref", "_ng_task_index", "_ng_rollout_index")
"""A failure row's fields but its message (NeMo Gym's names its agent's URL; ours the policy's error)."""


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _key(row: dict[str, Any]) -> tuple[int, int]:
    return row["_ng_task_index"], row["_ng_rollout_index"]


def _call(item: dict[str, Any]) -> tuple[Any, ...]:
    text = "".join(c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict))
    return item["type"], item.get("name"), item.get("arguments"), item.get("output"), text


@pytest.fixture
def config(ported: Any) -> Path:
    """The example's config in the ported tree, with the environment server's config it includes."""
    folder = ported.folder("example_single_tool_call")
    included = "environment_servers/single_agent_turn_legacy/configs/single_agent_turn_legacy.yaml"
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extract(included, ported.root)
    return folder / "configs" / f"{REFERENCE['config']}.yaml"


async def _collect(config: Path, rows: Path, out: Path, resume: bool = False, trajectory: bool = False, payloads: bool = False) -> Any:
    policy = ScriptedPolicyServer({prompt: [PolicyAnswer(**step) for step in steps] for prompt, steps in REFERENCE["policy"].items()})
    with policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        async with serve_environment(load_config_server(config)) as running, ResourcesClient(running.address) as client:
            return await collect_async(client, rows, out, CollectOptions(target=target, resume=resume, trajectory=trajectory, capture_payloads=payloads))


async def test_the_session_protocol_is_run_as_nemo_gym_runs_it(config: Path, tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in REFERENCE["rows"]))
    result = await _collect(config, rows, tmp_path / "out.jsonl")
    mine = {_key(r): r for r in _lines(tmp_path / "out.jsonl")}
    failed = {_key(r): r for r in _lines(tmp_path / "out_failures.jsonl")}
    for answer in REFERENCE["responses"]:
        key = _key(answer)
        if "_ng_failure_class" in answer:
            row = failed[key]
            assert {k: row[k] for k in FAILURE_FIELDS} == {k: answer[k] for k in FAILURE_FIELDS}
            assert set(row) == {*answer, *STAMPS}  # nothing of the request echoed
            assert "no scripted answer" in row["_ng_failure_message"]
        else:
            row = mine[key]
            assert set(row) == {*answer, *STAMPS}
            assert row["reward"] == answer["reward"]
            assert [_call(o) for o in row["response"]["output"]] == [_call(o) for o in answer["response"]["output"]]
            assert row["response"]["usage"]["total_tokens"] == answer["response"]["usage"]["total_tokens"]
        assert (row["_ng_environment_server"], row["_ng_result_type"]) == SERVER
    assert len(mine) + len(failed) == len(REFERENCE["responses"]) and result.dropped == {"environment_server_failed": 1}
    metrics = json.loads(result.metrics_path.read_text())
    assert differences(REFERENCE["metrics"][0]["agent_metrics"], metrics[0]["agent_metrics"], "agent_metrics") == []
    result = await _collect(config, rows, tmp_path / "out.jsonl", resume=True)  # not terminal: run again, failing again
    again = _lines(tmp_path / "out_failures.jsonl")
    assert [(r["_ng_task_index"], r.get("_ng_attempt_index")) for r in again] == [(2, None), (2, 1)]


async def test_an_observed_session_agents_evidence_comes_back_at_its_close_as_under_nemo_gym(config: Path, tmp_path: Path) -> None:
    """With --trajectory (NeMo Gym's `observability_enabled`), simple_agent's session gives its
    evidence at the session's close: one invocation per activation, its model calls referenced by
    response id, `ng_agent_observations` on the row; joined to the captured calls and projected into
    `ng_trajectory` by the collection's rules. Every evidence field equals NeMo Gym 0.7.0's on every
    row (its observed recording), clocks and generated ids aside."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in REFERENCE["rows"]))
    await _collect(config, rows, tmp_path / "out.jsonl", trajectory=True)
    mine = {_key(r): r for r in _lines(tmp_path / "out.jsonl")}
    theirs = {_key(r): r for r in REFERENCE["observed"]["responses"] if "_ng_failure_class" not in r}
    assert set(mine) == set(theirs) and len(theirs) == 4
    for key, answer in theirs.items():
        assert [p for p in EVIDENCE if p in answer] == [p for p in EVIDENCE if p in mine[key]], key
        assert set(mine[key]) == {*answer, *STAMPS}
        for part in (p for p in EVIDENCE if p in answer):
            assert differences(stable(answer[part], {}), stable(mine[key][part], {}), f"{key}.{part}") == []


async def test_an_observed_flat_simple_agents_evidence_is_nemo_gyms(config: Path, tmp_path: Path) -> None:
    """The same environment's flat config (simple_agent's own `/run` behind the legacy_agent
    relay) with --trajectory: the agent's own trajectory, its calls as NeMo Gym's model server
    records them, `ng_trajectory` and `ng_perf` equal NeMo Gym's observed run's, clocks and
    generated ids aside."""
    flat = REFERENCE["flat_observed"]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in flat["rows"]))
    await _collect(config.with_name(f"{flat['config']}.yaml"), rows, tmp_path / "out.jsonl", trajectory=True)
    mine = {_key(r): r for r in _lines(tmp_path / "out.jsonl")}
    theirs = {_key(r): r for r in flat["responses"] if "_ng_failure_class" not in r and "_nemo_refused" not in r}
    assert {k for k, r in mine.items() if "_gm_error" not in r} == set(theirs) and len(theirs) == 4  # (the unanswered prompt: NeMo Gym's /run a 500)
    for key, answer in theirs.items():
        assert [p for p in EVIDENCE if p in answer] == [p for p in EVIDENCE if p in mine[key]], key
        for part in (p for p in EVIDENCE if p in answer):
            assert differences(stable(answer[part], {}), stable(mine[key][part], {}), f"{key}.{part}") == []
    await _collect(config.with_name(f"{flat['config']}.yaml"), rows, tmp_path / "payloads.jsonl", payloads=True)  # capture alone, payloads kept
    calls = [c for r in _lines(tmp_path / "payloads.jsonl") if "_gm_error" not in r for c in r["ng_model_call_capture"]["calls"]]
    assert calls and all("model" not in c["request"] and "background" in c["response"] for c in calls)  # as sent; as the server's model dumps it
    assert calls[0]["model_ref"] == {"type": "responses_api_models", "name": "policy_model"}


def test_the_environment_servers_of_a_config_are_nemo_gyms() -> None:
    """Declared blocks front the agents they name; an agent without one gets the relay NeMo Gym's
    migration generates (its name taken: the agent's name, then the suffix again); an agent two
    blocks name, or an unbound one, has none."""
    document = {
        "env": {"resources_servers": {"impl": {"entrypoint": "app.py"}}},
        "a_simple_agent": {"responses_api_agents": {"simple_agent": {"entrypoint": "app.py", "resources_server": {"name": "env"}}}},
        "b_simple_agent": {"responses_api_agents": {"simple_agent": {"entrypoint": "app.py", "resources_server": {"name": "env"}}}},
        "b_environment_server": {"other": 1},
        "b_simple_agent_environment_server": {"other": 1},
        "c_agent": {"responses_api_agents": {"critpt_agent": {"entrypoint": "app.py"}}},
        "twice": {"responses_api_agents": {"simple_agent": {"entrypoint": "app.py"}}},
        "unbound": {"responses_api_agents": {"simple_agent": {"entrypoint": "app.py", "resources_server": {"name": "???"}}}},
        "no_entrypoint": {"responses_api_agents": {"simple_agent": {}}},
        "front": {"environment_servers": {"single_agent_turn_legacy": {"agent_server": {"name": "a_simple_agent"}}}},
        "t1": {"environment_servers": {"legacy_agent": {"agent_server": {"type": "responses_api_agents", "name": "twice"}}}},
        "t2": {"environment_servers": {"legacy_agent": {"user": {"type": "responses_api_agents", "name": "twice"}}}},
    }
    assert environment_servers_of(document) == {
        "a_simple_agent": ("front", "single_agent_turn_legacy"),
        "b_simple_agent": ("b_simple_agent_environment_server_environment_server", "legacy_agent"),
        "c_agent": ("c_environment_server", "legacy_agent"),
    }


async def test_the_environment_server_seeds_and_closes_as_nemo_gyms_does(ported: Any, config: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """single_agent_turn_legacy seeds the resources session with a ResourcesSeedSessionRequest
    (a session id, the episode, the task, its data), not the flat row: a server whose seed_session
    takes the row's own fields (example_session_state_mgmt's `initial_count`) refuses it and every
    episode fails at its seed, terminal, as NeMo Gym 0.7.0 recorded; one that takes the request
    (the example's server) binds the session to the episode and is closed under the same ids."""
    case = REFERENCE["stateful"]
    stateful = ported.folder("example_session_state_mgmt") / "configs" / f"{case['config']}.yaml"
    with zipfile.ZipFile(ported.wheel) as wheel:
        wheel.extract("environment_servers/single_agent_turn_legacy/configs/single_agent_turn_legacy.yaml", ported.root)
    stateful.write_text(case["yaml"])
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in case["rows"]))
    policy = ScriptedPolicyServer({prompt: [PolicyAnswer(**step) for step in steps] for prompt, steps in case["policy"].items()})
    with policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        async with serve_environment(load_config_server(stateful)) as running, ResourcesClient(running.address) as client:
            await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target))
    failed = {_key(r): r for r in _lines(tmp_path / "out_failures.jsonl")}
    assert not _lines(tmp_path / "out.jsonl") and len(failed) == len(case["responses"]) == 3
    for answer in case["responses"]:
        assert {k: failed[_key(answer)][k] for k in FAILURE_FIELDS} == {k: answer[k] for k in FAILURE_FIELDS}
        assert "initial_count" in failed[_key(answer)]["_ng_failure_message"]

    server = load_config_server(config)  # the example's own server: seeded by request, closed by the same ids
    rows.write_text("".join(json.dumps(row) + "\n" for row in REFERENCE["rows"]))
    with ScriptedPolicyServer({p: [PolicyAnswer(**s) for s in steps] for p, steps in REFERENCE["policy"].items()}) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted", api="responses")
        async with serve_environment(server) as running, ResourcesClient(running.address) as client:
            await collect_async(client, rows, tmp_path / "again.jsonl", CollectOptions(target=target))
    assert server._session_episodes == {} and len(server._closed_session_ids) == len(REFERENCE["rows"])
    assert not [r for r in caplog.records if "close_session answered" in r.getMessage()]
