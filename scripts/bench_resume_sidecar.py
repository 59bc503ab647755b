"""What `collect --resume` pays to read a large failures sidecar (BENCHMARKS.md, "Resume runs the
failures sidecar's rollouts again"): an output of ROWS rollouts, a sidecar of FAILED failure rows
(a third of them a rollout's second attempt, a tenth terminal), opened for resume as collect opens
it (gym_metrics.collector._outfile.OutputFile), median of --rounds. Run with the checkout to
measure first on PYTHONPATH:

    .venv/bin/python scripts/bench_resume_sidecar.py --rows 1000000 --failed 200000 --rounds 5
    PYTHONPATH=/tmp/base .venv/bin/python scripts/bench_resume_sidecar.py --rows 1000000 --failed 200000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import orjson


def write(folder: Path, rows: int, failed: int) -> Path:
    out = folder / "out.jsonl"
    with out.open("wb") as f:
        for i in range(rows):
            f.write(orjson.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": i, "_ng_rollout_index": 0, "reward": 1.0}) + b"\n")
    with (folder / "out_failures.jsonl").open("wb") as f:
        for j in range(failed):
            task = rows + j % (failed * 2 // 3 or 1)  # a third of the rows: a rollout's second attempt
            row = {"agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": 0, "reward": 0.0,
                   "_ng_failure_class": "judge_failed", "failure_reason": "the judge timed out"}  # fmt: skip
            if j % 10 == 0:
                row["_ng_failure_terminal"] = True
            f.write(orjson.dumps(row) + b"\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--failed", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from gym_metrics.collector import _outfile

    with tempfile.TemporaryDirectory() as tmp:
        out = write(Path(tmp), args.rows, args.failed)
        times = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            opened = _outfile.OutputFile(out, True, None)
            times.append(time.perf_counter() - started)
            opened.close()
        retries = getattr(opened, "retries", None)
        again = len(retries.again) if retries is not None else "(not read)"
    print(f"{args.rows:,} rows, {args.failed:,} failed attempts: opened for resume in {statistics.median(times):.3f} s "
          f"(median of {args.rounds}; {min(times):.3f}-{max(times):.3f}); rollouts run again: {again}")  # fmt: skip


if __name__ == "__main__":
    main()
