"""Benchmark `gym-metrics aggregate`: wall time, CPU and peak RSS, beside the polars floor.

Usage: python scripts/bench_aggregate.py [--sizes 1000000 8000000] [--runs 5] [--floor]

Each size runs the real CLI in a fresh process on a file of T tasks x 8 repeats with the fields
reward, is_correct, latency_s, num_tool_calls and a string, writing the metrics file with
rollout_infos. With --floor, `scripts/polars_floor.py` (the same information the shortest
polars way; needs polars) runs in turn with it, A B A B ..., and the table gives medians and
the median of the pairwise wall-time ratios. Peak RSS is the largest single process (the CLI or
a render worker it forks; a worker's shared copy-on-write pages count in both). The load
average is printed before and after each size: the machine is shared.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
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


def measure(cmd: list[str]) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of `cmd` run to completion in this (fresh) process."""
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def commands(path: Path) -> dict[str, list[str]]:
    out = path.with_name(f"{path.stem}_floor.json")
    return {
        "gym-metrics": [sys.executable, "-m", "gym_metrics.cli", "aggregate", str(path), "-q"],
        "floor": [sys.executable, str(Path(__file__).with_name("polars_floor.py")), str(path), str(out)],
    }


def one_run(name: str, path: Path) -> tuple[float, float, float]:
    """One measurement in its own interpreter: RUSAGE_CHILDREN's peak is over all children."""
    done = subprocess.run(
        [sys.executable, __file__, "--_one", name, str(path)], check=True, capture_output=True, text=True
    )
    wall, cpu, rss = map(float, done.stdout.split())
    return wall, cpu, rss


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--data-dir", type=Path, default=Path("bench_data"))
    parser.add_argument("--runs", type=int, default=5, help="runs per size and command (medians are reported)")
    parser.add_argument("--floor", action="store_true", help="run the polars floor in turn with each run")
    ns = parser.parse_args()
    ns.data_dir.mkdir(exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    names = ["gym-metrics", "floor"] if ns.floor else ["gym-metrics"]
    header = "| rollouts | file MB | " + " | ".join(f"{n} wall s | {n} CPU s | {n} peak MB" for n in names)
    print(header + (" | wall ratio |" if ns.floor else " |") + " load before / after |")
    print("|---:" * (2 + 3 * len(names) + (1 if ns.floor else 0)) + "|---|")
    for size in ns.sizes:
        path = ns.data_dir / f"rollouts_{size}.jsonl"
        if not path.exists():
            make_rollouts(path, size)
        before = load()
        runs: dict[str, list[tuple[float, float, float]]] = {n: [] for n in names}
        for _ in range(ns.runs):
            for name in names:  # alternating: a drift in the machine's speed hits both alike
                runs[name].append(one_run(name, path))
        cells = []
        for name in names:
            walls, cpus, rss = zip(*runs[name])
            cells += [f"{statistics.median(walls):.2f}", f"{statistics.median(cpus):.2f}", f"{max(rss):.0f}"]
        if ns.floor:
            ratios = [a[0] / b[0] for a, b in zip(runs["gym-metrics"], runs["floor"])]
            cells.append(f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")
        print(f"| {size:,} | {path.stat().st_size / 1e6:.0f} | " + " | ".join(cells) + f" | {before} / {load()} |")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--_one":
        print(*measure(commands(Path(sys.argv[3]))[sys.argv[2]]))
        sys.exit(0)
    sys.exit(main())
