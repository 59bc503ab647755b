"""Rollout health throughput: `gym-metrics health` against NeMo Gym 0.7.0's `run_health_checks`
on the same rollouts file (figures in BENCHMARKS.md, "Rollout health").

    .venv/bin/python scripts/bench_health.py --rows 3000 --out /tmp/health_bench.jsonl
    # then, side by side, the two commands it prints; `cmp` their reports afterwards

The rows are tests/data/health/clean.jsonl's six (real episodes of the counter environment
collected with --trajectory, 19 KB each) repeated, each with its own (task, rollout): two
repeats per task.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/health_bench.jsonl"))
    args = parser.parse_args()
    rows = [json.loads(line) for line in (ROOT / "tests/data/health/clean.jsonl").read_text().splitlines()]
    with args.out.open("w") as f:
        for n in range(args.rows):
            f.write(json.dumps({**rows[n % len(rows)], "_ng_task_index": n // 2, "_ng_rollout_index": n % 2}) + "\n")
    print(f"wrote {args.rows:,} rows ({args.out.stat().st_size / 1e6:.1f} MB) to {args.out}")
    print("gym-metrics:", f"{ROOT}/.venv/bin/gym-metrics health {args.out} -o /tmp/hb_ours")
    print("NeMo Gym:   ", "/tmp/ngvenv/bin/python -c 'from pathlib import Path; from nemo_gym.rollout_health import run_health_checks; "
          f"run_health_checks(Path(\"{args.out}\"), output_dir=Path(\"/tmp/hb_ng\"))'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
