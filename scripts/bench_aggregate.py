"""Benchmark `gym-metrics aggregate`: wall time and peak RSS at 10k, 100k and 1M rollouts.

Usage: python scripts/bench_aggregate.py [--sizes 10000 100000 1000000] [--out BENCHMARKS.md section printed]

Each size runs the real CLI in a fresh process (`/usr/bin/time`-style peak RSS from
resource.getrusage of the child), on a file of T tasks x 8 repeats with the fields reward,
is_correct, latency_s, num_tool_calls and a string, including rollout_infos and writing the file.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPEATS = 8


def make_rollouts(path: Path, n_rollouts: int, seed: int = 0) -> None:
    """Deterministic synthetic rollouts file: one agent, tasks x 8 repeats."""
    rng = np.random.default_rng(seed)
    tasks = n_rollouts // REPEATS
    t = np.repeat(np.arange(tasks), REPEATS)
    r = np.tile(np.arange(REPEATS), tasks)
    p = rng.uniform(size=tasks)[t]
    correct = rng.uniform(size=len(t)) < p
    latency = np.round(rng.gamma(2.0, 0.7, size=len(t)), 5)
    calls = rng.integers(0, 5, size=len(t))
    with path.open("w") as f:
        for ti, ri, c, lat, k in zip(t.tolist(), r.tolist(), correct.tolist(), latency.tolist(), calls.tolist()):
            f.write(
                f'{{"agent_ref": {{"name": "bench_agent"}}, "_ng_task_index": {ti}, "_ng_rollout_index": {ri}, '
                f'"reward": {1.0 if c else 0.0}, "is_correct": {"true" if c else "false"}, "latency_s": {lat}, '
                f'"num_tool_calls": {k}, "verdict": "{"ok" if c else "bad"}"}}\n'
            )


def run_cli(path: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one `gym-metrics aggregate` run in a child process."""
    cmd = [sys.executable, "-m", "gym_metrics.cli", "aggregate", str(path), "-q"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--data-dir", type=Path, default=Path("bench_data"))
    parser.add_argument("--runs", type=int, default=3, help="runs per size; the best wall time is reported")
    ns = parser.parse_args()
    ns.data_dir.mkdir(exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print("| rollouts | file MB | wall s (best of runs) | peak RSS MB | output MB |")
    print("|---:|---:|---:|---:|---:|")
    for size in ns.sizes:
        path = ns.data_dir / f"rollouts_{size}.jsonl"
        if not path.exists():
            make_rollouts(path, size)
        # Peak RSS of children is a high-water mark over all children: measure each size in
        # its own interpreter so the figure belongs to this size alone.
        results = [
            subprocess.run(
                [sys.executable, __file__, "--_one", str(path)], check=True, capture_output=True, text=True
            ).stdout.split()
            for _ in range(ns.runs)
        ]
        wall = min(float(r[0]) for r in results)
        rss = max(float(r[1]) for r in results)
        out = path.with_name(f"{path.stem}_aggregate_metrics.json")
        print(
            f"| {size:,} | {path.stat().st_size / 1e6:.0f} | {wall:.2f} | {rss:.0f} | {out.stat().st_size / 1e6:.0f} |"
        )
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--_one":
        w, m = run_cli(Path(sys.argv[2]))
        print(w, m)
        sys.exit(0)
    sys.exit(main())
