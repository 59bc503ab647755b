"""Rollout health throughput: `gym-metrics health` against NeMo Gym 0.7.0's `run_health_checks`
on the same rollouts file (figures in BENCHMARKS.md, "Rollout health").

    .venv/bin/python scripts/bench_health.py --rows 3000 --out /tmp/health_bench.jsonl
    .venv/bin/python scripts/bench_health.py --small --rows 1000000 --out /tmp/health_1m.jsonl
    .venv/bin/python scripts/bench_health.py --small --no-trajectory --rows 1000000 --out /tmp/health_1m_plain.jsonl
    # then, side by side, the two commands it prints; `cmp` their reports afterwards

Default rows: tests/data/health/clean.jsonl's six (real episodes of the counter environment
collected with --trajectory, 19 KB each) repeated, each with its own (task, rollout): two
repeats per task. `--small`: single-turn rollouts as a collect writes them, every other one
with its trajectory (one turn, one model call, a TrajectoryRecord NeMo Gym's schema accepts:
about 2.4 KB) and the others without (about 0.6 KB; 1.6 KB a row on average); four repeats per
task.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def small_row(n: int, repeats: int = 4, trajectory: bool = True) -> dict[str, Any]:
    """One single-turn rollout; odd ones carry a one-turn, one-call trajectory (with `trajectory`)."""
    task, rollout = divmod(n, repeats)
    prompt = [{"role": "user", "content": f"Problem {task}: what is {task} times {rollout + 3} minus 7? Think step by step."}]
    answer = [{"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
               "content": [{"type": "output_text", "text": f"{task} times {rollout + 3} is {task * (rollout + 3)}; minus 7 gives {task * (rollout + 3) - 7}.", "annotations": []}]}]  # fmt: skip
    usage = {"input_tokens": 40, "output_tokens": 38, "total_tokens": 78}
    response = {"id": f"resp_{n}", "object": "response", "model": "policy", "status": "completed", "output": answer, "usage": usage}
    row: dict[str, Any] = {"responses_create_params": {"input": prompt}, "response": response, "reward": float(n % 3 != 0),
                           "extracted_answer": str(task * (rollout + 3) - 7), "agent_ref": {"name": "agent"},
                           "_ng_task_index": task, "_ng_rollout_index": rollout}  # fmt: skip
    if n % 2 and trajectory:
        call_id, rid = f"mc_{n:08d}", f"{task}-{rollout}"
        ref = {"model_call_id": call_id, "model_ref": None, "response_id": f"resp_{n}"}
        row["ng_trajectory"] = {
            "schema_version": "1.0", "task_id": str(task), "rollout_id": rid,
            "invocations": [{"kind": "agent_invocation", "invocation_id": "root", "parent_invocation_id": None, "status": "completed", "model_calls": [ref]}],
            "turns": [{"invocation_id": "root", "task_id": str(task), "rollout_id": rid, "turn_no": 1, "timestamp": 1795896167.5 + n, "question": prompt, "answer": answer,
                       "reasoning_content": None, "resolved": True, "step_count": 1, "model_calls": [ref]}],
            "model_calls": [{"model_call_id": call_id, "started_at": 1795896167.0 + n, "completed_at": 1795896168.0 + n, "duration_ms": 1000.0,
                             "request": {"input": prompt, "model": "policy"}, "response": response,
                             "response_metadata": {"response_id": f"resp_{n}", "model": "policy", "dialect": "responses", "status_code": 200, "response_status": "completed"},
                             "token_stats": {"prompt_tokens": 40, "completion_tokens": 38, "reasoning_tokens": 0, "total_tokens": 78, "cached_tokens": 0}}],
            "tool_calls": [], "gaps": [],
        }  # fmt: skip
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--small", action="store_true", help="single-turn rows, half of them with a small trajectory")
    parser.add_argument("--no-trajectory", action="store_true", help="with --small: no row with a trajectory (collect's default)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/health_bench.jsonl"))
    args = parser.parse_args()
    rows = [json.loads(line) for line in (ROOT / "tests/data/health/clean.jsonl").read_text().splitlines()]
    with args.out.open("w") as f:
        for n in range(args.rows):
            row = small_row(n, trajectory=not args.no_trajectory) if args.small else {**rows[n % len(rows)], "_ng_task_index": n // 2, "_ng_rollout_index": n % 2}
            f.write(json.dumps(row) + "\n")
    print(f"wrote {args.rows:,} rows ({args.out.stat().st_size / 1e6:.1f} MB) to {args.out}")
    print("gym-metrics:", f"{ROOT}/.venv/bin/gym-metrics health {args.out} -o /tmp/hb_ours")
    print("NeMo Gym:   ", "/tmp/ngvenv/bin/python -c 'from pathlib import Path; from nemo_gym.rollout_health import run_health_checks; "
          f"run_health_checks(Path(\"{args.out}\"), output_dir=Path(\"/tmp/hb_ng\"))'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
