"""What the viewer's reading of `--count-errors-as-zero` costs a request (docs/viewer.md): the
agent summary of a run of N rows, with and without a metrics file whose counts say failures
were scored 0. Prints the median of --rounds timings of each, in ms.

    .venv/bin/python scripts/bench_view_counted_errors.py --rows 1000000 --agents 4 --rounds 7
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from gym_metrics.view._index import Columns, Indexed
from gym_metrics.view._query import agents
from gym_metrics.view._runs import Run


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--agents", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=7)
    ns = ap.parse_args()
    n, rng = ns.rows, np.random.default_rng(0)
    agent = (np.arange(n) % ns.agents).astype(np.int32)
    task = np.arange(n) // ns.agents // 4
    error = np.where(rng.random(n) < 0.01, 2, 0).astype(np.int8)
    masked = rng.random(n) < 0.01
    cols = Columns(np.arange(n), agent, task, np.arange(n) % 4, rng.random(n), error, np.zeros(n, np.int8), masked)
    snap = Indexed(cols, tuple(f"a{i}" for i in range(ns.agents)), np.zeros(0, np.int64))
    metrics = [{"agent_ref": {"name": f"a{i}"}, "group_level_metrics": [{"num_rollouts": int(((agent == i) & (~masked | (error != 0))).sum())}]}
               for i in range(ns.agents)]  # fmt: skip
    run = Run("r", None, None)
    run.metrics = lambda: metrics  # type: ignore[method-assign]
    for label, zero in (("left out (no inference)", lambda: None), ("counted 0 (inferred)", lambda: run.zero_agents(snap))):
        times = []
        for _ in range(ns.rounds):
            started = time.perf_counter()
            agents(snap, zero())
            times.append((time.perf_counter() - started) * 1000)
        print(f"{label}: {statistics.median(times):.1f} ms for {n:,} rows, {ns.agents} agents")


if __name__ == "__main__":
    main()
