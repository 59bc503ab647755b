"""Record which rollouts NeMo Gym 0.7.0's resumed collection runs again, and with which
`_ng_attempt_index`, for tests/collector/test_resume_failures.py to hold `collect --resume` to.

Each case is an input of ten tasks (a rollout each), an output holding some of them and a
failures sidecar holding failed attempts (once, twice, three times, terminal, terminal after a
retryable one, a rollout in both files, a row without indices, rows naming no agent), read by NeMo Gym's own
`RolloutCollectionHelper._load_from_cache` under a `NEMO_GYM_MAX_ROLLOUT_ATTEMPTS` of its own
(unset, 2, 5). Recorded: the files, and the rows NeMo Gym dispatches (their indices and
`_ng_attempt_index`, in its order).

Run with NeMo Gym's venv:

    /tmp/ngvenv/bin/python scripts/make_nemo_resume_reference.py --out tests/data/nemo_gym_resume.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

TASKS = 10


def row(task: int) -> dict[str, Any]:
    return {"responses_create_params": {"input": f"task {task}"}, "agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": 0}


def failed(task: int | None, terminal: bool | None = None, failure: str = "judge_failed") -> dict[str, Any]:
    found: dict[str, Any] = {"reward": 0.0, "_ng_failure_class": failure, "agent_ref": {"name": "a"}}
    if task is not None:
        found |= {"_ng_task_index": task, "_ng_rollout_index": 0}
    if terminal is not None:
        found["_ng_failure_terminal"] = terminal
    return found


OUTPUT = [row(0) | {"reward": 1.0}, row(5) | {"reward": 1.0}]
SIDECAR = [
    failed(1),
    failed(2), failed(2, failure="agent_run_error"),
    failed(3), failed(3), failed(3),
    failed(4, terminal=True, failure="environment_server_failed"),
    failed(5),
    failed(6), failed(6, terminal=True),
    failed(None),
    failed(8, terminal=False),
    # rows naming no agent (NeMo Gym keys on the indices alone): counted with task 8's, task 9's own
    {k: v for k, v in failed(8).items() if k != "agent_ref"},
    {k: v for k, v in failed(9).items() if k != "agent_ref"}, {k: v for k, v in failed(9).items() if k != "agent_ref"},
]  # fmt: skip
CASES = {"default": None, "max_attempts_2": "2", "max_attempts_5": "5"}


def dispatched(folder: Path, max_attempts: str | None) -> list[dict[str, Any]]:
    from nemo_gym.rollout_collection import RolloutCollectionHelper  # type: ignore[import-not-found]

    if max_attempts is None:
        os.environ.pop("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", None)
    else:
        os.environ["NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"] = max_attempts
    config = SimpleNamespace(
        output_jsonl_fpath=str(folder / "out.jsonl"), materialized_jsonl_fpath=folder / "materialized.jsonl",
        retry_invalid_judge_responses=False, retry_terminal_timeouts=False, dispatch_longest_first=False,
    )  # fmt: skip
    helper = RolloutCollectionHelper.model_construct()
    rows, *_ = helper._load_from_cache(config, retain_results_in_memory=False)  # type: ignore[arg-type]
    return [{k: r[k] for k in ("_ng_task_index", "_ng_rollout_index", "_ng_attempt_index") if k in r} for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    inputs = [row(task) for task in range(TASKS)]
    cases = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, lines in (("materialized.jsonl", inputs), ("out.jsonl", OUTPUT), ("out_failures.jsonl", SIDECAR)):
            (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
        for case, max_attempts in CASES.items():
            cases[case] = {"max_attempts_env": max_attempts, "dispatched": dispatched(folder, max_attempts)}
    reference = {"input": inputs, "output": OUTPUT, "sidecar": SIDECAR, "cases": cases}
    args.out.write_text(json.dumps(reference, indent=1) + "\n")


if __name__ == "__main__":
    main()
