"""Issue 41's test: for datasets and seeds drawn per run, with answers right, wrong, partly right
and malformed, collect through a real `reasoning_gym` server gives exactly reasoning-gym's own
reward for every row, the rows made by the `dataset` command and the reward computed here from
an entry reasoning-gym generates here (never read from the row)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from _rg_cases import RUN_SEED, dataset_command, generated, names, reasoning_gym_reward, rg
from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.targets import ModelTargetConfig
from gym_metrics.testing import ScriptedPolicyServer, serve_environment
from gym_metrics_servers.reasoning_gym.app import ReasoningGymServer
from gym_metrics_servers.reasoning_gym.scripted import KINDS, answer_text, response


def scored_names() -> list[str]:
    """The datasets whose entries one seed fixes: some of codeio's reference programs write
    their input to a temporary file whose path is the answer (seed 1903737289, entry 0), and a
    second build finds the first one's file and takes another name, so a score against a second
    build is not a check of scoring; codeio's rows are checked in test_reasoning_gym_rows.py."""
    return [name for name in names() if name != "codeio"]


def _answered_rows(tmp_path: Path, picked: list[str], rng: random.Random, entries: int) -> tuple[Path, dict[int, tuple[float, str]]]:
    """The dataset command's rows of `picked` (a seed each, drawn), each answered in every way;
    reasoning-gym's reward for each, by task index (with what it is, for failure messages)."""
    path, expected, lines = tmp_path / "answered.jsonl", {}, []
    for name in picked:
        seed = rng.randrange(2**31)
        rows = dataset_command(tmp_path, name, "--size", str(entries), "--seed", str(seed))
        dataset = rg().create_dataset(name, size=entries, seed=seed)
        for index, row in enumerate(rows):
            entry = generated(dataset, index)
            for kind in KINDS:
                text = answer_text(entry, kind)
                task = len(expected)
                expected[task] = (reasoning_gym_reward(dataset, entry, text), f"{name} seed {seed} entry {index} {kind}")
                lines.append(orjson.dumps({**row, "_ng_task_index": task, "response": response(text)}))
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, expected


async def _collect(path: Path, out: Path, options: CollectOptions | None = None) -> dict[int, dict[str, Any]]:
    async with serve_environment(ReasoningGymServer()) as server, ResourcesClient(server.address) as client:
        await collect_async(client, path, out, options)
    return {row["_ng_task_index"]: row for row in map(orjson.loads, out.read_bytes().splitlines())}


def _check(got: dict[int, dict[str, Any]], expected: dict[int, tuple[float, str]]) -> None:
    assert sorted(got) == sorted(expected)
    wrong = [(what, got[t]["reward"], want) for t, (want, what) in expected.items() if got[t]["reward"] != want]
    assert not wrong, f"run seed {RUN_SEED}: {len(wrong)} of {len(expected)} rewards differ from reasoning-gym's: {wrong[:10]}"
    rewards = [want for want, _ in expected.values()]
    assert any(r == 1.0 for r in rewards) and any(r == 0.0 for r in rewards)


async def test_fourteen_datasets_drawn_for_this_run_score_as_reasoning_gym_scores(tmp_path: Path) -> None:
    rng = random.Random(RUN_SEED)
    path, expected = _answered_rows(tmp_path, rng.sample(scored_names(), 14), rng, entries=1)
    _check(await _collect(path, tmp_path / "out.jsonl"), expected)


@pytest.mark.slow  # every dataset reasoning-gym has, two entries, seven answers each: about 15 s
async def test_every_dataset_scores_as_reasoning_gym_scores(tmp_path: Path) -> None:
    rng = random.Random(RUN_SEED + 2)
    path, expected = _answered_rows(tmp_path, scored_names(), rng, entries=2)
    got = await _collect(path, tmp_path / "out.jsonl")
    _check(got, expected)
    partial = [t for t, (want, _) in expected.items() if 0 < want < 1]
    assert partial and all(got[t]["reward"] == expected[t][0] for t in partial)


async def test_a_mix_answered_by_a_policy_through_collect_scores_as_reasoning_gym_scores(tmp_path: Path) -> None:
    """The rows without a response: collect asks a scripted policy (by each row's question),
    then verifies; the per-dataset metrics cover the mix's datasets."""
    rng = random.Random(RUN_SEED + 3)
    picked = rng.sample(scored_names(), 5)
    seed, size = rng.randrange(2**31), 20
    rows = dataset_command(tmp_path, "--mix", *(f"{n}:{rng.randint(1, 4)}" for n in picked), "--size", str(size), "--seed", str(seed))
    answers: dict[str, str] = {}
    expected: dict[int, tuple[float, str]] = {}
    for index, row in enumerate(rows):
        ref = row["reasoning_gym"]
        dataset = rg().create_dataset(ref["dataset"], seed=ref["seed"], size=ref["size"])
        entry = generated(dataset, ref["index"])
        text = answers.setdefault(entry["question"], answer_text(entry, rng.choice(KINDS)))
        expected[index] = (reasoning_gym_reward(dataset, entry, text), f"{ref['dataset']} {ref}")
    path = tmp_path / "tasks.jsonl"
    path.write_bytes(b"".join(orjson.dumps({**row, "_ng_task_index": i}) + b"\n" for i, row in enumerate(rows)))
    with ScriptedPolicyServer(answers) as policy:
        options = CollectOptions(target=ModelTargetConfig(url=policy.url, model="scripted"))
        got = await _collect(path, tmp_path / "out.jsonl", options)
    assert sorted(got) == sorted(expected)
    wrong = [(what, got[t]["reward"], want) for t, (want, what) in expected.items() if got[t]["reward"] != want]
    assert not wrong, f"run seed {RUN_SEED}: {wrong}"
    metrics = orjson.loads((tmp_path / "out_aggregate_metrics.json").read_bytes())
    agent = metrics[0]["agent_metrics"] if isinstance(metrics, list) else metrics["agent_metrics"]
    drawn = {row["reasoning_gym"]["dataset"] for row in rows}
    assert {key.split("/")[0] for key in agent if key.endswith("/pass@1")} == drawn


async def test_an_answer_whose_scoring_never_ends_is_stopped_and_the_server_serves_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """`<answer>9**9**9**9</answer>`: polynomial_multiplication's score_answer evaluates it
    (as puzzle24's and countdown's do), which ran forever holding the GIL: the server answered
    no one, whatever --verify-timeout said. It is stopped at its deadline, scored 0 saying why,
    and the next verify is answered."""
    from gym_metrics.ecosystems.reasoning_gym import _scoring, dataset_rows, json_bytes

    monkeypatch.setattr(_scoring, "SCORE_SECONDS", 0.5)
    row = orjson.loads(json_bytes(next(dataset_rows("polynomial_multiplication", size=1, seed=1))))

    def answered(text: str) -> dict[str, Any]:
        return {**row, "response": {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]}}

    async with serve_environment(ReasoningGymServer()) as server, ResourcesClient(server.address) as client:
        evil = await asyncio.wait_for(client.verify(answered("<answer>9**9**9**9</answer>")), 30)
        honest = await asyncio.wait_for(client.verify(answered(f"<answer>{row['entry']['answer']}</answer>")), 30)
    assert evil["reward"] == 0.0 and "scoring stopped after 0.5 s" in evil["score_error"]
    assert honest["reward"] == 1.0



async def test_entries_with_integers_past_64_bits_are_written_exactly_and_score() -> None:
    """lcm with 13-digit numbers: its result (25 digits) stopped `dataset reasoning-gym` with an
    internal error (orjson's 64-bit integers), and the client's verify of such a row too."""
    import json

    from gym_metrics.ecosystems.reasoning_gym import dataset_rows, json_bytes

    rows = [json.loads(json_bytes(r)) for r in dataset_rows("lcm", size=3, seed=42, config={"min_value": 10**12, "max_value": 10**13})]
    assert any(abs(r["entry"]["metadata"]["result"]) >= 2**64 for r in rows)
    async with serve_environment(ReasoningGymServer()) as server, ResourcesClient(server.address) as client:
        for row in rows:
            answered = {**row, "response": response(f"<answer>{row['entry']['answer']}</answer>")}
            assert (await client.verify(answered))["reward"] == 1.0
