"""`gym-metrics demo --reasoning-gym`: a mix of real reasoning-gym tasks, answered by a scripted
policy, collected through a real server; each reward is reasoning-gym's own."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from _rg_cases import generated, reasoning_gym_reward, rg
from gym_metrics.cli import main
from gym_metrics.cli._demo_reasoning_gym import MIX, SIZE
from gym_metrics.ecosystems.reasoning_gym import response_text


def test_the_demo_scores_a_mix_as_reasoning_gym_does(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--reasoning-gym", "--out-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "per dataset mean_reward: " in printed and "pass@1" in printed
    tasks = {row["_ng_task_index"]: row for row in map(orjson.loads, (tmp_path / "reasoning_gym_tasks.jsonl").read_bytes().splitlines())}
    rollouts = [orjson.loads(line) for line in (tmp_path / "reasoning_gym_online_rollouts.jsonl").read_bytes().splitlines()]
    assert len(tasks) == len(rollouts) == SIZE
    assert {row["reasoning_gym"]["dataset"] for row in tasks.values()} <= {name for name, _ in MIX}
    rewards = []
    for rollout in rollouts:
        ref = tasks[rollout["_ng_task_index"]]["reasoning_gym"]
        dataset = rg().create_dataset(ref["dataset"], seed=ref["seed"], size=ref["size"], **ref["config"])
        text = response_text(rollout["response"])  # (the chat answer's <think> part became a reasoning item)
        assert rollout["reward"] == reasoning_gym_reward(dataset, generated(dataset, ref["index"]), text)
        rewards.append(rollout["reward"])
    assert 0 < sum(rewards) < len(rewards) and any(0 < r < 1 for r in rewards)
    metrics = orjson.loads((tmp_path / "reasoning_gym_online_rollouts_aggregate_metrics.json").read_bytes())
    agent = metrics[0]["agent_metrics"] if isinstance(metrics, list) else metrics["agent_metrics"]
    assert agent["mean/reward"] == pytest.approx(sum(rewards) / len(rewards))
