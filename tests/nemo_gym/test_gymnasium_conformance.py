"""NeMo Gym 0.7.0's gymnasium servers (reset / step; issue 41 item 3), ported by their imports
(the wheel's `resources_servers/gymnasium` base and the environments on it) and collected by
`collect` with a policy that replays the model turns NeMo Gym recorded in the wheel
(`data/example_rollouts.jsonl`, made by NeMo Gym's gymnasium_agent with a real model): every
rollout's turns (each model item, each tool output and observation, in order), reward,
terminated, truncated and info equal the recording's.

Environments: example_multi_turn_gymnasium (observations as user messages), wordle (tool
calls answered through `info["tool_outputs"]`), grl_tetris (several moves a turn; its boards
depend on an unseeded draw too, which the test finds again from the recording: see
_tetris_global_seeds) and grl_sokoban (on gym-sokoban). openair_congestion's rollouts were
recorded by a script of its own, step by step, not by gymnasium_agent: each is replayed as
gymnasium_agent would play those steps and checked against every step recorded. blackjack deals
from an unseeded random generator, so a replay cannot meet the same cards: it runs here with the
rules checked instead.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import json
import math
import random
import re
import sys
import types
import zipfile
from pathlib import Path
from typing import Any, Iterable, Iterator

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.nemo_gym import load_config_server
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer, serve_environment

from _ci import missing

pytestmark = pytest.mark.slow

REPLAYED = {
    "example_multi_turn_gymnasium": "example_multi_turn_gymnasium.yaml",
    "wordle": "wordle.yaml",
    "grl_tetris": "grl_tetris.yaml",
    "grl_sokoban": "grl_sokoban.yaml",
}
NEEDS = {"grl_tetris": ["gymnasium"], "grl_sokoban": ["gymnasium", "gym_sokoban"], "openair_congestion": ["jsonschema"]}
"""The packages an environment imports beyond the nemo-gym extra (the dev extra brings them)."""


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
async def test_the_recorded_episodes_replay_turn_for_turn(env: str, ported: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each recorded rollout replayed by a collect of its own (repeats of a task share their
    prompt, so one script per rollout keeps their turns apart)."""
    _need(env)
    expected = recorded(ported.wheel, env, "example_rollouts.jsonl")
    inputs = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in _inputs(ported.wheel, env, expected)}
    if env == "wordle":
        _wordle_words(ported.folder(env), expected)
    if env == "grl_sokoban":
        _pkg_resources_before_3_12(monkeypatch)
    server = load_config_server(ported.folder(env) / "configs" / REPLAYED[env])
    global_seeds = _tetris_global_seeds(server, expected, inputs) if env == "grl_tetris" else {}
    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        assert (await client.server_info()).steps is True
        for n, want in enumerate(expected):
            key = (want["_ng_task_index"], want["_ng_rollout_index"])
            steps = _turns(want) if want["truncated"] and not want["terminated"] else _max_steps(ported, env, REPLAYED[env])
            with _global_random(global_seeds.get(key)):
                got = await _replay(client, inputs[key], want, steps, tmp_path / str(n))
            assert (got["terminated"], got["truncated"], got["info"]) == (want["terminated"], want["truncated"], want["info"]), key
            recorded_by_0_7 = [k for k in ("mask_sample", "failure_kind", "failure_reason") if k in want]  # (the older recordings lack them)
            assert {k: got[k] for k in recorded_by_0_7} == {k: want[k] for k in recorded_by_0_7}, key
        assert len(running.handler.sessions.store) == 0


async def _replay(client: ResourcesClient, row: dict[str, Any], want: dict[str, Any], max_steps: int, folder: Path) -> dict[str, Any]:
    """`row` collected alone with a policy that answers the model turns of `want` (a rollout as
    gymnasium_agent returns it); the rollout collected, its turns, reward and prompt checked."""
    folder.mkdir()
    rows, out = folder / "rows.jsonl", folder / "out.jsonl"
    rows.write_text(json.dumps(row) + "\n")
    with ScriptedPolicyServer(replay_script([want]), by_conversation=True) as policy:
        target = ModelTargetConfig(url=policy.url, model="scripted")
        await collect_async(client, rows, out, CollectOptions(target=target, max_steps=max_steps))
    [got] = [json.loads(line) for line in out.read_text().splitlines()]
    key = (want["_ng_task_index"], want["_ng_rollout_index"])
    assert [shape(i) for i in got["response"]["output"]] == [shape(i) for i in want["response"]["output"]], key
    assert got["reward"] == pytest.approx(want["reward"]), key
    assert [(m.get("role"), _text(m.get("content"))) for m in got["responses_create_params"]["input"]] == \
           [(m.get("role"), _text(m.get("content"))) for m in want["responses_create_params"]["input"]]  # fmt: skip
    return got


OPENAIR_RECORDED_ONLY = ("response", "reward", "terminated", "truncated", "info", "trajectory", "example_policy", "evidence_scope")


async def test_openair_congestion_replays_its_recorded_steps(ported: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """openair_congestion's rollouts were recorded by its generate_example_rollouts.py, not by
    gymnasium_agent: a scripted policy that posts /reset, /step and /close itself and keeps every
    step (observation, tool call, tool output fields, reward, next observation) in `trajectory`,
    the last model turn as `response` and some keys of the last step's info as `info`. Each is
    replayed through collect as gymnasium_agent plays those steps; its turns, observations,
    reward, terminated, truncated and those info keys equal the recording's."""
    _need("openair_congestion")
    config = "openair_congestion.yaml"
    server = load_config_server(ported.folder("openair_congestion") / "configs" / config)
    _sum_of_3_12_before_it(ported.folder("openair_congestion"), monkeypatch)
    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        for n, recording in enumerate(recorded(ported.wheel, "openair_congestion", "example_rollouts.jsonl")):
            row = {k: v for k, v in recording.items() if k not in OPENAIR_RECORDED_ONLY}
            want = _as_gymnasium_agent_rollout(recording)
            got = await _replay(client, row, want, _max_steps(ported, "openair_congestion", config), tmp_path / str(n))
            assert sum(step["reward"] for step in recording["trajectory"]) == pytest.approx(recording["reward"])
            assert (got["terminated"], got["truncated"]) == (recording["terminated"], recording["truncated"])
            assert {k: got["info"].get(k) for k in recording["info"]} == recording["info"]
            assert shape(got["response"]["output"][-1]) == shape(recording["response"]["output"][-1])  # the turn it kept
        assert len(running.handler.sessions.store) == 0
    assert server.session_state == {}  # every episode's backend slot given back


def _as_gymnasium_agent_rollout(recording: dict[str, Any]) -> dict[str, Any]:
    """The rollout gymnasium_agent returns for the recorded steps: the reset's observation after
    the prompt; each step's tool call (its generator's call ids, `call_<step>`), then, unless the
    episode ended there, the app's tool output for it and the next observation."""
    steps, output = recording["trajectory"], []
    for n, step in enumerate(steps):
        call_id = f"call_{step['step']}"
        output.append({"type": "function_call", "name": step["action"]["name"], "arguments": _sent_arguments(step), "call_id": call_id})
        if n < len(steps) - 1:
            result = {"accepted": step["guardrail_accepted"], "rejection_reason": step["rejection_reason"], "step_idx": step["step_idx"]}
            output.append({"type": "function_call_output", "call_id": call_id, "output": json.dumps(result, default=str)})
            output.append({"type": "message", "role": "user", "content": step["next_observation"]})
    prompt = [*recording["responses_create_params"]["input"], {"type": "message", "role": "user", "content": steps[0]["observation"]}]
    return {**recording, "responses_create_params": {"input": prompt}, "response": {"output": output}}


def _sum_of_3_12_before_it(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """openair_congestion's dynamics and rewards add floats with the built-in `sum`, which NeMo
    Gym's Python (>= 3.13) compensates (Neumaier, since 3.12) and an older one does not: its
    observations print rewards in full (`last reward: -0.39327288868527266`), so the last bit
    shows. On such a Python the environment's modules are given that `sum` (below)."""
    if sys.version_info >= (3, 12):
        return
    for module in list(sys.modules.values()):
        if str(getattr(module, "__file__", None) or "").startswith(str(folder) + "/"):
            monkeypatch.setattr(module, "sum", compensated_sum, raising=False)


def compensated_sum(iterable: Iterable[Any], /, start: Any = 0) -> Any:
    """CPython >= 3.12's built-in `sum`, step for step: exact ints first; from the first float on,
    exact floats added with Neumaier's compensation, ints that fit a C long added plainly; from
    anything else (a numpy float too) on, `+`. (Equal to 3.13's on mixed ints, bools, floats,
    numpy floats, infinities and overflows.)"""
    items = iter(iterable)
    result = start
    if type(result) is int:
        for item in items:
            if type(item) is int or type(item) is bool:
                result += item
                continue
            result = result + item
            break
        else:
            return result
    if type(result) is float:
        total, carry = result, 0.0
        for item in items:
            if type(item) is float:
                new = total + item
                carry += (total - new) + item if abs(total) >= abs(item) else (item - new) + total
                total = new
                continue
            if isinstance(item, int) and -(2**63) <= item < 2**63:
                total += float(item)
                continue
            result = (total + carry if carry and math.isfinite(carry) else total) + item
            break
        else:
            return total + carry if carry and math.isfinite(carry) else total
    for item in items:
        result = result + item
    return result


def _sent_arguments(step: dict[str, Any]) -> str:
    """A recorded tool call's arguments as its policy sent them. The generator wrote its rows with
    `sort_keys`, which reordered each action's arguments; the env echoes them in the order it got
    them in the next observation (`Last action: name({...})`), which every later prompt carries."""
    name = step["action"]["name"]
    echoed = re.search(rf"\nLast action: {re.escape(name)}\((\{{.*\}})\); last reward", step["next_observation"])
    assert echoed, step["next_observation"]
    arguments = ast.literal_eval(echoed.group(1))
    assert arguments == step["action"]["arguments"]
    return json.dumps(arguments)


def _need(env: str) -> None:
    """Skip (fail under CI=true) when a package the environment imports is missing. Looked up,
    not imported: gym_sokoban imports pkg_resources, which grl_sokoban provides first."""
    for name in NEEDS.get(env, []):
        if importlib.util.find_spec(name) is None:
            missing(f"{name} is not installed (pip install -e '.[dev]': the dev extra brings it for NeMo Gym's {env})")


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


def _tetris_global_seeds(server: Any, expected: list[dict[str, Any]], inputs: dict[tuple[int, int], dict[str, Any]]) -> dict[tuple[int, int], int]:
    """grl_tetris deals a row's pieces from `random` seeded by the row's seed, but weighted by
    how many of each piece TetrisEnv's constructor drew before, in a reset of its own that the
    global `random` deals unseeded: NeMo Gym itself deals one seed different boards from run to
    run, and the counts its recording had are not recorded. For each rollout, the first seed of
    the global `random` under which the wheel's TetrisEnv (played alone, the recorded moves)
    deals every board the recording shows; its replay runs with the global `random` so seeded,
    and its turns, reward and info are then checked as any other's."""
    app = importlib.import_module("resources_servers.grl_tetris.app")
    labels = {"left": 0, "right": 1, "down": 2}
    found = {}
    for want in expected:
        key = (want["_ng_task_index"], want["_ng_rollout_index"])
        row, items = inputs[key], want["response"]["output"]
        shown = [_text(want["responses_create_params"]["input"][-1]["content"])] + [_text(i["content"]) for i in items if i.get("role") == "user"]
        turns = [[int(a) if a.isdigit() else labels[a.lower()] for a in app.ACTION_TAG_PATTERN.findall(_text(i["content"]))] for i in items if i.get("role") == "assistant"]
        for seed in range(1000):
            with _global_random(seed):
                tetris = app.TetrisEnv(server._env_config_from_metadata(row))
                dealt = [server._format_observation(tetris.reset(seed=row.get("seed")))]
                for moves in turns[: len(shown) - 1]:
                    dealt.append(server._format_observation([tetris.step(a) for a in moves][-1][0]))
            if dealt == shown:
                found[key] = seed
                break
        else:
            raise AssertionError(f"{key}: no seed of the global random under 1000 deals the recorded boards")
    return found


@contextlib.contextmanager
def _global_random(seed: int | None) -> Iterator[None]:
    """The global `random` seeded with `seed` (None: left alone) inside, put back after."""
    state = random.getstate()
    if seed is not None:
        random.seed(seed)
    try:
        yield
    finally:
        random.setstate(state)


def _pkg_resources_before_3_12(monkeypatch: pytest.MonkeyPatch) -> None:
    """gym_sokoban 0.0.6 finds its tile images (read at every step) with pkg_resources, gone from
    setuptools >= 81; grl_sokoban's sokoban_env then puts in its own shim, whose
    `importlib.resources.files(<a module>)` needs Python >= 3.12 (NeMo Gym needs 3.13) and raises
    TypeError before. On such a Python the same shim, by the module's folder, goes in first."""
    if sys.version_info >= (3, 12) or importlib.util.find_spec("pkg_resources") is not None:
        return
    shim = types.ModuleType("pkg_resources")

    def resource_filename(package: str, resource: str) -> str:
        return str(Path(str(importlib.import_module(package).__file__)).parent / resource)

    shim.resource_filename = resource_filename  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pkg_resources", shim)


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


def _max_steps(ported: Any, env: str, config_name: str) -> int:
    import yaml

    config = yaml.safe_load((ported.folder(env) / "configs" / config_name).read_text())
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


async def test_an_episode_the_environment_did_not_end_frees_its_state(ported: Any) -> None:
    """GymnasiumServer frees a session's state in its own `close_session`, which its /step calls
    only when an episode ends: NeMo Gym's agent leaves the state of an episode closed by its
    client, cut at max steps or abandoned behind for good. Here each gets that call once."""
    server = load_config_server(ported.folder("example_multi_turn_gymnasium") / "configs" / REPLAYED["example_multi_turn_gymnasium"])
    row = {"responses_create_params": {"input": [{"role": "user", "content": "What is 15 multiplied by 8?"}]},
           "follow_ups": ["Now divide that result by 6."], "expected_answer": "20"}  # fmt: skip

    def said(text: str) -> dict[str, Any]:
        return {"id": "r", "created_at": 0, "model": "m", "object": "response", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "output": [{"id": "m", "type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}]}  # fmt: skip

    async with serve_environment(server) as running, ResourcesClient(running.address) as client:
        env = running.env
        closed, _ = await client.reset_session(row)
        await client.step(closed, said("120"))
        assert len(env.session_turns) == 1
        assert await client.close_session(closed) is True  # closed by its client mid-episode
        ended, _ = await client.reset_session(row)
        await client.step(ended, said("120"))
        assert (await client.step(ended, said("20")))["terminated"] is True  # its /step freed it
        assert env.session_turns == {}
        abandoned, _ = await client.reset_session(row)
        await running.handler.sessions.close(abandoned)  # what the idle sweep does
        assert env.session_turns == {} and len(running.handler.sessions.store) == 0
