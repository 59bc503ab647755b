"""`gym-metrics demo --reasoning-gym`: a small mix of reasoning-gym's tasks as task rows, and a
scripted policy on loopback that answers them in every way (right, partly right, wrong, without
tags), so a newcomer sees real tasks scored by reasoning-gym's own scorers end to end."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MIX = (("leg_counting", 2.0), ("chain_sum", 1.0), ("spell_backward", 1.0), ("word_sorting", 1.0))
SIZE, SEED = 24, 41
KINDS = ("right", "right", "partly", "wrong", "no_tags", "right")
"""The scripted policy's answers, task by task in turn: half right, the rest each other kind."""


@contextlib.contextmanager
def scripted_policy(out_dir: Path) -> Iterator[tuple[Path, Any]]:
    """The mix's rows in `out_dir`, a scripted policy answering them, and the collect options
    that generate each rollout with it."""
    from gym_metrics.collector import CollectOptions
    from gym_metrics.ecosystems.reasoning_gym import MixPart, json_bytes, mix_rows
    from gym_metrics.targets import ModelTargetConfig
    from gym_metrics.testing import ScriptedPolicyServer
    from gym_metrics_servers.reasoning_gym.scripted import answer_text

    out_dir.mkdir(parents=True, exist_ok=True)
    path, answers = out_dir / "reasoning_gym_tasks.jsonl", dict[str, str]()
    with path.open("wb") as f:
        for index, row in enumerate(mix_rows([MixPart(name, weight) for name, weight in MIX], size=SIZE, seed=SEED, agent="scripted_policy")):
            answers.setdefault(row["entry"]["question"], answer_text(row["entry"], KINDS[index % len(KINDS)]))
            f.write(json_bytes({**row, "_ng_task_index": index}, newline=True))
    with ScriptedPolicyServer(answers) as policy:
        print(f"scripted policy serving on {policy.url}; answering {SIZE} reasoning-gym tasks of {len(MIX)} datasets", file=sys.stderr)
        yield path, CollectOptions(target=ModelTargetConfig(url=policy.url, model="scripted-policy", max_concurrency=16))


def per_dataset_line(result: Any) -> str:
    """`per dataset mean_reward: chain_sum 0.50 (4 tasks), ...` for the demo's one agent."""
    metrics = result.aggregates[0].agent_metrics if result.aggregates else {}
    names = sorted({key.split("/")[0] for key in metrics if key.endswith("/mean_reward")})
    parts = [f"{name} {metrics[f'{name}/mean_reward']:.2f} ({metrics.get(f'{name}/mean_reward/tasks_used', 0)} tasks)" for name in names]
    return "per dataset mean_reward: " + ", ".join(parts)
