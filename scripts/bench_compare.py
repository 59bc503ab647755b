"""`gym-metrics compare`'s analytic statistics at scale: 2 agents x 125k tasks x 8 repeats.

Usage: python scripts/bench_compare.py [--tasks 125000] [--repeats 8] [--runs 5]

The rollouts file (binary rewards, a per-task difficulty shared by both agents, agent B 1 point
better) is read once with `load_agents`, outside the clock; then `compare_paired` (the paired
clustered difference, t interval and p-value, McNemar where it applies, variance components,
minimum detectable effect, Holm-adjusted p-values) is timed for `mean_reward` and `pass@k`
(k = repeats), median of --runs. The issue's goal: under 2 s, reading and the bootstrap
excluded. The CLI end to end (reading included) is timed once for reference.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from gym_metrics.compare import compare_paired, load_agents


def write_rollouts(path: Path, tasks: int, repeats: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(size=tasks)
    with path.open("wb") as f:
        for agent, lift in (("a", 0.0), ("b", 0.01)):
            passed = rng.uniform(size=(tasks, repeats)) < np.clip(difficulty + lift, 0, 1)[:, None]
            ref = orjson.dumps({"name": agent})
            lines = [
                b'{"agent_ref":%s,"_ng_task_index":%d,"_ng_rollout_index":%d,"reward":%s}\n' % (ref, t, r, b"1.0" if p else b"0.0")
                for t in range(tasks) for r, p in enumerate(passed[t])
            ]  # fmt: skip
            f.write(b"".join(lines))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=125_000)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--runs", type=int, default=5)
    ns = parser.parse_args()
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rollouts.jsonl"
        write_rollouts(path, ns.tasks, ns.repeats)
        started = time.perf_counter()
        agents, names = load_agents([path], ["a", "b"])
        read = time.perf_counter() - started
        metrics = ["mean_reward", f"pass@{ns.repeats}"]
        times = []
        for _ in range(ns.runs):
            started = time.perf_counter()
            report = compare_paired(agents, names, metrics)
            times.append(time.perf_counter() - started)
        started = time.perf_counter()
        cli = [sys.executable, "-m", "gym_metrics.cli", "compare", str(path), "--agents", "a", "b", "--json"]
        subprocess.run(cli, check=True, capture_output=True)
        end_to_end = time.perf_counter() - started
    first = report.comparisons[0]
    print(f"{ns.tasks:,} tasks x {ns.repeats} repeats x 2 agents; reading {read:.2f} s (not counted)")
    print(f"compare_paired ({', '.join(metrics)}): median {statistics.median(times):.3f} s of {ns.runs} "
          f"(min {min(times):.3f}, max {max(times):.3f}); difference {first.difference:+.4f}, p {first.p_value:.3g}")  # fmt: skip
    print(f"`gym-metrics compare FILE --agents a b --json` end to end (reading included): {end_to_end:.2f} s")
    print(f"load at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
