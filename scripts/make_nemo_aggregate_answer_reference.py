"""Record NeMo Gym 0.7.0's own `/aggregate_metrics` answer (`nemo_gym.reward_profile.
compute_aggregate_metrics`, which its resources server's `aggregate_metrics` returns) and its
`RewardProfiler().rollout_info_from_result`, for tests/nemo_gym/test_aggregate_answer.py, which
runs `record` with gym_metrics.nemo_gym.reward_profile's and compares.

A tool for producing test data, run in a throwaway nemo-gym venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_aggregate_answer_reference.py            # write
    /tmp/ngvenv/bin/python scripts/make_nemo_aggregate_answer_reference.py --check    # compare (exit 1 on a difference)

Each case of CASES aggregated with no hooks and with HOOKS (a compute_metrics with per-task
metrics, a get_key_metrics, a compute_repeat_metrics), dumped; INFO_ROWS through
rollout_info_from_result. Written to tests/data/nemo_gym_aggregate/answers.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

from reference_file import write_or_check  # scripts/

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_aggregate" / "answers.json"
T, R = "_ng_task_index", "_ng_rollout_index"
PERF = {"prompt_tokens": 5, "completion_tokens": 3, "token_observability_coverage": 1.0}
CASES: dict[str, list[dict[str, Any]]] = {
    "rewards, an answer and a bool over 3 tasks x 2 repeats": [
        {T: t, R: r, "reward": float((t + r) % 2), "extracted_answer": "AB"[r % 2], "ok": bool(r)} for t in range(3) for r in range(2)
    ],
    "a masked rollout": [{T: 0, R: 0, "reward": 1.0}, {T: 0, R: 1, "reward": 0.0, "mask_sample": True}, {T: 1, R: 0, "reward": 0.5}],
    "every rollout masked": [{T: 0, R: 0, "reward": 1.0, "mask_sample": True}],
    "ng_perf blocks": [{T: 0, R: r, "reward": 1.0, "ng_perf": {**PERF, "num_turns": r + 1, "total_latency_ms": 10.0 * (r + 1)}} for r in range(3)],
    "uneven repeats, a missing field, a string field": [
        {T: 0, R: 0, "reward": 0.25, "score": 2}, {T: 0, R: 1, "reward": 0.75}, {T: 0, R: 2, "reward": 1.0, "score": 4},
        {T: 3, R: 0, "reward": 0.0, "score": 1, "label": "x"},
    ],
    "no rollouts": [],
}  # fmt: skip
INFO_ROWS = [
    {T: 1, R: 2, "reward": 0.5, "response": {"usage": {"input_tokens": 3, "cached": True, "details": {"a": 1}}}, "flag": False, "name": "s", "_hidden": 1},
    {T: 0, R: 0, "response": None, "tokens": 7, "usage_like": 1.5},
]  # fmt: skip


def custom_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    return {"n_tasks": len(tasks), "per_task_metrics": [{T: rows[0][T], "best": max(row["reward"] for row in rows)} for rows in tasks]}


def key_metrics(agent_metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in agent_metrics.items() if k.startswith("mean/") or k == "n_tasks"}


def repeat_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    rewards = [row["reward"] for rows in tasks for row in rows]
    return {"top": max(rewards)}


def record(compute_aggregate_metrics: Callable[..., Any], profiler: Any) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NeMo Gym's pandas warns of a zero standard error
        for name, rows in CASES.items():
            answers[name] = compute_aggregate_metrics(rows).model_dump(mode="json")
            hooked = compute_aggregate_metrics(rows, compute_metrics_fn=custom_metrics, get_key_metrics_fn=key_metrics, compute_repeat_metrics_fn=repeat_metrics)
            answers[f"{name}, with hooks"] = hooked.model_dump(mode="json")
    return {"answers": answers, "rollout_infos": [profiler.rollout_info_from_result(row) for row in INFO_ROWS]}


def main() -> int:
    from nemo_gym.reward_profile import RewardProfiler, compute_aggregate_metrics

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    data = {"nemo_gym": "0.7.0", **record(compute_aggregate_metrics, RewardProfiler())}
    return write_or_check(OUT, json.dumps(data, indent=1, sort_keys=True) + "\n", args.check)


if __name__ == "__main__":
    sys.exit(main())
