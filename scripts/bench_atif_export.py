"""ATIF export throughput: `gym-metrics export --atif` against NeMo Gym 0.7.0's `gym eval export
--format atif` on the same rollouts file (figures in BENCHMARKS.md, "ATIF export").

    .venv/bin/python scripts/bench_atif_export.py --rows 5000 --out /tmp/atif_bench.jsonl
    # then, side by side, the two commands it prints (each removes its output directory first)

The rows are tests/data/atif/cases.jsonl's "collected over responses" (a real three-turn
episode of the counter environment with reasoning and two calls in one turn, 13 KB), each with
its own (task, rollout) and ids, so each export writes `--rows` files and a manifest.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--out", type=Path, default=Path("/tmp/atif_bench.jsonl"))
    args = parser.parse_args()
    case = next(c for c in map(json.loads, (ROOT / "tests/data/atif/cases.jsonl").read_text().splitlines()) if c["case"] == "collected over responses")
    template = json.dumps(case["row"])
    with args.out.open("w") as f:
        for n in range(args.rows):
            row = json.loads(template)
            row.update(_ng_task_index=n // 4, _ng_rollout_index=n % 4)
            f.write(json.dumps(row) + "\n")
    size = args.out.stat().st_size
    print(f"wrote {args.rows:,} rows ({size / 1e6:.1f} MB) to {args.out}")
    ours = f"sh -c 'rm -rf /tmp/atif_ours && exec {ROOT}/.venv/bin/gym-metrics export {args.out} --atif -o /tmp/atif_ours --agent-version 0.1'"
    theirs = (f"sh -c 'rm -rf /tmp/atif_ng && exec /tmp/ngvenv/bin/gym eval export --format atif --rollouts {args.out} "
              "--output-dir /tmp/atif_ng --session-id atif_bench --agent-version 0.1'")  # fmt: skip
    print("gym-metrics:", ours)
    print("NeMo Gym:   ", theirs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
