"""What `perf_summary` costs `aggregate`: the same rollouts with and without an `ng_perf` block on
every row (NeMo Gym's collection with observability on, `collect --trajectory`), aggregated in
turn, `--rounds` times each; medians of wall and process CPU seconds, and their ratio. With
blocks, the rows holding one are read again from the file (aggregate/_perf.py).

    python scripts/bench_perf_summary.py [--rows 200000] [--rounds 5] [--trajectory-kb 0]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path


def write_rows(path: Path, rows: int, perf: bool, pad_kb: int = 0) -> None:
    rng = random.Random(5)
    pad = {"turns": [{"turn_no": n, "answer": "y" * 1000} for n in range(pad_kb)]} if pad_kb else None
    with path.open("w") as f:
        for i in range(rows):
            row = {"agent_ref": {"name": f"agent{i % 2}"}, "_ng_task_index": i // 8, "_ng_rollout_index": i % 8, "reward": float(rng.random() < 0.5),
                   "response": {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "x" * 200}]}],
                                "usage": {"input_tokens": 50, "output_tokens": 20, "total_tokens": 70}}}  # fmt: skip
            if pad is not None:  # what a trajectory adds to a row collected with observability on
                row["ng_trajectory"] = pad
            if perf:
                row["ng_perf"] = {"num_turns": rng.randint(1, 6), "num_tool_calls": rng.randint(0, 5), "token_observability_coverage": 1.0,
                                  "prompt_tokens": rng.randint(100, 5000), "cached_prompt_tokens": 0, "completion_tokens": rng.randint(10, 900),
                                  "reasoning_tokens": 0, "total_latency_ms": rng.uniform(100, 9000)}  # fmt: skip
            f.write(json.dumps(row) + "\n")


def one(path: Path) -> tuple[float, float]:
    from gym_metrics.aggregate import aggregate_file

    wall, cpu = time.perf_counter(), time.process_time()
    aggregate_file(path, path.with_suffix(".json"), keep_rows=False)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trajectory-kb", type=int, default=0, help="each row also holds a trajectory of about this many KB")
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        files = {"without ng_perf": Path(tmp) / "plain.jsonl", "with ng_perf": Path(tmp) / "perf.jsonl"}
        for name, path in files.items():
            write_rows(path, ns.rows, name == "with ng_perf", ns.trajectory_kb)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in files}
        for _ in range(ns.rounds):
            for name, path in files.items():
                times[name].append(one(path))
        assert "perf_summary" in files["with ng_perf"].with_suffix(".json").read_text()
        print(f"{ns.rows:,} rows ({ns.trajectory_kb} KB trajectories), 2 agents, medians of {ns.rounds}\n\n| rows | MB | wall s | CPU s |\n|---|---:|---:|---:|")
        base = None
        for name, path in files.items():
            wall, cpu = statistics.median(t[0] for t in times[name]), statistics.median(t[1] for t in times[name])
            base = base or (wall, cpu)
            print(f"| {name} | {path.stat().st_size / 1e6:.0f} | {wall:.2f} ({wall / base[0]:.2f}x) | {cpu:.2f} ({cpu / base[1]:.2f}x) |")


if __name__ == "__main__":
    main()
