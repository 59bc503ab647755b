"""Regenerate sample.jsonl: 6 reasoning-gym tasks (2 entries each of leg_counting, chain_sum and
spell_backward, seed 7) x 4 answers (right, partly right, wrong, without tags; task t's first
answer is the (t mod 4)-th, so first-sample pass@1 is not 1) of one agent.

Run `python -m gym_metrics_servers.reasoning_gym.make_sample` with the reasoning-gym extra
installed. The rows are `gym-metrics dataset reasoning-gym`'s own, with a response and their
indices added, so the file is byte-for-byte reproducible for one reasoning-gym version; a test
checks it is up to date.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gym_metrics.ecosystems.reasoning_gym import json_bytes
from gym_metrics_servers.reasoning_gym.scripted import answer_text, response

OUT = Path(__file__).with_name("sample.jsonl")
DATASETS = ("leg_counting", "chain_sum", "spell_backward")
ENTRIES, SEED = 2, 7
ANSWERS = ("right", "partly", "wrong", "no_tags")
AGENT = "scripted_policy"


def build_rows() -> list[dict[str, Any]]:
    """The sample's rows, task by task, each task's answers in ANSWERS order."""
    from gym_metrics.ecosystems.reasoning_gym import dataset_rows

    rows = []
    tasks = [row for name in DATASETS for row in dataset_rows(name, size=ENTRIES, seed=SEED, agent=AGENT)]
    for task_index, task in enumerate(tasks):
        for rollout_index in range(len(ANSWERS)):
            kind = ANSWERS[(task_index + rollout_index) % len(ANSWERS)]
            text = answer_text(task["entry"], kind)
            rows.append({**task, "_ng_task_index": task_index, "_ng_rollout_index": rollout_index, "response": response(text)})
    return rows


def render(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json_bytes(row, newline=True) for row in rows)


if __name__ == "__main__":
    OUT.write_bytes(render(build_rows()))
    print(f"wrote {OUT}")
