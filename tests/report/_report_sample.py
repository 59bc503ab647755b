"""A small 3-agent rollouts file with usage fields, aggregated: what the report tests draw."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

AGENTS = ("baseline", "candidate", "long_context")


def write_rollouts(path: Path, tasks: int = 40, repeats: int = 4, agents: tuple[str, ...] = AGENTS, seed: int = 0) -> Path:
    """Binary rewards whose pass rate differs by agent and task, with token usage."""
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0.05, 0.95, tasks)
    with path.open("wb") as f:
        for a, name in enumerate(agents):
            skill = 0.1 * a
            for t in range(tasks):
                for r in range(repeats):
                    passed = rng.random() < min(1.0, difficulty[t] + skill)
                    out_tokens = int(rng.integers(50, 400) + 200 * (1 - difficulty[t]))
                    row = {
                        "agent_ref": {"name": name}, "_ng_task_index": t, "_ng_rollout_index": r,
                        "reward": 1.0 if passed else 0.0, "expected_answer": str(t),
                        "response": {"output_text": f"answer {t if passed else -1}",
                                     "usage": {"input_tokens": 120 + t, "output_tokens": out_tokens,
                                               "total_tokens": 120 + t + out_tokens}},
                    }  # fmt: skip
                    f.write(orjson.dumps(row) + b"\n")
    return path


def sample_metrics(tmp: Path, **kwargs: object) -> Path:
    """The aggregated metrics file of write_rollouts' file."""
    from gym_metrics.aggregate import aggregate_file

    rollouts = write_rollouts(tmp / "three_agents.jsonl", **kwargs)  # type: ignore[arg-type]
    out, _, _ = aggregate_file(rollouts)
    return out
