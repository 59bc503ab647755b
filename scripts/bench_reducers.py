"""Benchmark the built-in reward reducers on 125k tasks x 8 samples (issue 4: each well under 50 ms).

Usage: python scripts/bench_reducers.py [--tasks 125000] [--samples 8] [--runs 7] [--out FILE]

Rewards are random 0/1 (seeded; each task has its own pass probability, so every pass count
0..8 occurs). For each reducer: `compute` (the value) and `summarize` (value, stderr, 95%
interval, tasks used/dropped) on a fresh TaskRewards built from flat arrays, so nothing cached by
an earlier call helps; and `compute` from a Python list of lists (what a caller holding plain
lists pays, conversion included). Best of --runs. Prints a Markdown table (and writes it to
--out when given).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gym_metrics.reducers import TaskRewards, get_reducer, summarize_reducers

REDUCERS = [
    "mean_reward", "avg", "pass_rate",
    "pass@1", "pass@8", "pass^1", "pass^8",
    "unbiased_pass@1", "unbiased_pass@4", "unbiased_pass@8",
    "unbiased_pass^1", "unbiased_pass^4", "unbiased_pass^8",
]  # fmt: skip


def best_ms(fn: Callable[[], object], runs: int) -> float:
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=125_000)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, help="also write the table here")
    ns = parser.parse_args()

    rng = np.random.default_rng(ns.seed)
    p = rng.random((ns.tasks, 1))
    matrix = (rng.random((ns.tasks, ns.samples)) < p).astype(np.float64)
    flat = matrix.ravel()
    offsets = np.arange(ns.tasks + 1, dtype=np.int64) * ns.samples
    lists = matrix.tolist()

    def fresh() -> TaskRewards:
        return TaskRewards(flat, offsets)

    lines = [
        f"{ns.tasks:,} tasks x {ns.samples} samples, random 0/1 rewards (seed {ns.seed}); best of {ns.runs} runs, ms.",
        "",
        "| reducer | value | compute | summarize (value + stderr + 95% CI) | compute from list of lists |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in REDUCERS:
        metric = get_reducer(name)
        value = metric.compute(fresh())
        compute = best_ms(lambda: metric.compute(fresh()), ns.runs)
        summarize = best_ms(lambda: metric.summarize(fresh()), ns.runs)
        from_lists = best_ms(lambda: metric.compute(lists), ns.runs)
        lines.append(f"| `{name}` | {value:.4f} | {compute:.1f} | {summarize:.1f} | {from_lists:.1f} |")
    convert = best_ms(lambda: TaskRewards.of(lists), ns.runs)
    server = ["pass@1", "pass@8", "pass^8", "mean_reward"]
    together = best_ms(lambda: summarize_reducers(server, fresh()), ns.runs)
    lines += [
        "",
        f"Of the list-of-lists column, {convert:.1f} ms is `TaskRewards.of(lists)` (the conversion). "
        f"A server listing `{' '.join(server)}` (value + uncertainty for all four, sharing the per-task "
        f"columns): {together:.1f} ms.",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.system()}; "
        f"CPython {platform.python_version()}, numpy {np.__version__}.",
    ]
    text = "\n".join(lines)
    print(text)
    if ns.out:
        ns.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
