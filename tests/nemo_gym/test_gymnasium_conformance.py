"""NeMo Gym 0.7.0's gymnasium servers (reset / step; issue 41 item 3), ported by their imports
(the wheel's `resources_servers/gymnasium` base and the environments on it) and collected by
`collect` with a policy that replays the model turns NeMo Gym recorded in the wheel
(`data/example_rollouts.jsonl`, made by NeMo Gym's gymnasium_agent with a real model): every
rollout's turns (each model item, each tool output and observation, in order), reward,
terminated, truncated and info equal the recording's.

Environments: example_multi_turn_gymnasium (observations as user messages) and wordle (tool
calls answered through `info["tool_outputs"]`). blackjack deals from an unseeded random
generator, so a replay cannot meet the same cards: it runs here with the rules checked instead.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

pytestmark = pytest.mark.slow

REPLAYED = {"example_multi_turn_gymnasium": "example_multi_turn_gymnasium.yaml", "wordle": "wordle.yaml"}


def recorded(wheel: Path, env: str, name: str) -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel) as z:
        text = z.read(f"resources_servers/{env}/data/{name}").decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.get("text", "") for p in content or () if isinstance(p, dict))


def replay_script(rows: list[dict[str, Any]]) -> dict[str, list[PolicyAnswer]]:
    """The recorded model turns, by the user messages before them and the tool turns since the
    last one (what ScriptedPolicyServer(by_conversation=True) keys answers by)."""
    script: dict[str, list[PolicyAnswer]] = {}
    for row in rows:
        users = [_text(m["content"]) for m in row["responses_create_params"]["input"] if m.get("role") == "user"]
        turn: list[dict[str, Any]] = []
        items = row["response"]["output"]

        def flush() -> None:
            if turn:
                text = "".join(_text(i.get("content")) for i in turn if i.get("type") == "message")
                reasoning = "".join(s.get("text", "") for i in turn if i.get("type") == "reasoning" for s in i.get("summary") or ())
                calls = [{"name": i["name"], "arguments": i["arguments"], "call_id": i["call_id"]} for i in turn if i.get("type") == "function_call"]
                script.setdefault("\n".join(users), []).append(PolicyAnswer(text=text, tool_calls=calls, reasoning=reasoning or None))
                turn.clear()

        for item in items:
            if item.get("role") == "user":
                flush()
                users.append(_text(item["content"]))
            elif item.get("type") == "function_call_output":
                flush()
            else:
                turn.append(item)
        flush()
    return script


def shape(item: dict[str, Any]) -> tuple[Any, ...]:
    """What a trajectory item says (ids and model names aside)."""
    kind = item.get("type")
    if kind == "function_call":
        return (kind, item["name"], item["arguments"], item["call_id"])
    if kind == "function_call_output":
        return (kind, item["call_id"], item["output"])
    if kind == "reasoning":
        return (kind, "".join(s.get("text", "") for s in item.get("summary") or ()))
    return (kind or "message", item.get("role"), _text(item.get("content")))


@pytest.mark.parametrize("env", sorted(REPLAYED))
async def test_the_recorded_episodes_replay_turn_for_turn(env: str, ported: Any, tmp_path: Path) -> None:
    """Each recorded rollout replayed by a collect of its own (repeats of a task share their
    prompt, so one script per rollout keeps their turns apart)."""
    expected = recorded(ported.wheel, env, "example_rollouts.jsonl")
    inputs = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in _inputs(ported.wheel, env, expected)}
    if env == "wordle":
        _wordle_words(ported.folder(env), expected)
    server = load_config_server(ported.folder(env) / "configs" / REPLAYED[env])
    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        assert (await client.server_info()).steps is True
        for n, want in enumerate(expected):
            key = (want["_ng_task_index"], want["_ng_rollout_index"])
            rows, out = tmp_path / f"rows{n}.jsonl", tmp_path / f"out{n}.jsonl"
            rows.write_text(json.dumps(inputs[key]) + "\n")
            with ScriptedPolicyServer(replay_script([want]), by_conversation=True) as policy:
                target = ModelTargetConfig(url=policy.url, model="scripted")
                steps = _turns(want) if want["truncated"] and not want["terminated"] else _max_steps(ported, env)
                await collect_async(client, rows, out, CollectOptions(target=target, max_steps=steps))
            [got] = [json.loads(line) for line in out.read_text().splitlines()]
            assert [shape(i) for i in got["response"]["output"]] == [shape(i) for i in want["response"]["output"]], key
            assert got["reward"] == pytest.approx(want["reward"]), key
            assert (got["terminated"], got["truncated"], got["info"]) == (want["terminated"], want["truncated"], want["info"]), key
            recorded_by_0_7 = [k for k in ("mask_sample", "failure_kind", "failure_reason") if k in want]  # (the older recordings lack them)
            assert {k: got[k] for k in recorded_by_0_7} == {k: want[k] for k in recorded_by_0_7}, key
            assert [(m.get("role"), _text(m.get("content"))) for m in got["responses_create_params"]["input"]] == \
                   [(m.get("role"), _text(m.get("content"))) for m in want["responses_create_params"]["input"]]  # fmt: skip
        assert len(running.handler.sessions.store) == 0


def _wordle_words(folder: Path, expected: list[dict[str, Any]]) -> None:
    """wordle's dictionary is downloaded by its generate_data.py (no network here): the words its
    recorded episodes needed instead, the targets and every guess the recording found valid."""
    words = {str(r.get("custom_target") or "") for r in _inputs_of_wordle(folder)}
    outputs = {i["call_id"]: json.loads(i["output"]) for r in expected for i in r["response"]["output"] if i.get("type") == "function_call_output"}
    for r in expected:
        for i in r["response"]["output"]:
            if i.get("type") == "function_call" and i["name"] == "submit_guess" and outputs.get(i["call_id"], {}).get("valid"):
                words.add(json.loads(i["arguments"])["guess"].lower())
    (folder / "data" / "guesses.txt").write_text("\n".join(sorted(w for w in words if w)) + "\n")


def _inputs_of_wordle(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "data" / "example.jsonl").read_text().splitlines() if line.strip()]


def _inputs(wheel: Path, env: str, expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows NeMo Gym's collection sent (materialized inputs when the wheel has them); the
    recorded prompt without the observation reset appended to it."""
    try:
        rows = recorded(wheel, env, "example_rollouts_materialized_inputs.jsonl")
    except KeyError:
        example = recorded(wheel, env, "example.jsonl")
        rows = [{**example[r["_ng_task_index"]], "_ng_task_index": r["_ng_task_index"], "_ng_rollout_index": r["_ng_rollout_index"]} for r in expected]
    return [{k: v for k, v in r.items() if k not in ("response", "reward")} for r in rows]


def _turns(row: dict[str, Any]) -> int:
    """Model turns of a recorded episode. wordle's truncated one stops after 12 where its config
    now says max_steps 30: it was recorded with 12, which its replay is given."""
    turns, before = 0, None
    for item in row["response"]["output"]:
        model = item.get("type") in ("reasoning", "function_call") or item.get("role") == "assistant"
        turns += model and not before
        before = model
    return turns


def _max_steps(ported: Any, env: str) -> int:
    import yaml

    config = yaml.safe_load((ported.folder(env) / "configs" / REPLAYED[env]).read_text())
    agents = [b["responses_api_agents"] for b in config.values() if isinstance(b, dict) and "responses_api_agents" in b]
    return int(next(iter(agents[0].values())).get("max_steps", 10))


async def test_blackjack_plays_by_its_rules(ported: Any, tmp_path: Path) -> None:
    example = recorded(ported.wheel, "blackjack", "example.jsonl")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({**r, "_ng_task_index": n, "_ng_rollout_index": 0}) + "\n" for n, r in enumerate(example)))
    server = load_config_server(ported.folder("blackjack") / "configs" / "blackjack.yaml")
    def player(prompt: str) -> str:  # hit below 15, as a cautious player does
        value = int(prompt.split("\n")[0].rsplit("= ", 1)[1])
        return "<action>hit</action>" if value < 15 else "<action>stand</action>"

    with ScriptedPolicyServer(player) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted")
        async with serve_environment(server) as running, ResourcesClient(running.address) as client:
            await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(target=target))
    for row in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines()):
        info = row["info"]
        assert row["terminated"] is True and info["result"] in ("win", "loss", "draw", "bust")
        assert row["reward"] == {"win": 1.0, "draw": 0.0, "loss": -1.0, "bust": -1.0}[info["result"]]
        assert row["responses_create_params"]["input"][-1]["content"].startswith("Your hand: [")  # reset's observation
