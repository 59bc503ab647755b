"""The start-up a command pays before its work: a fresh interpreter importing what `collect`
imports (`gym_metrics.collector`, `gym_metrics.cli._collect`), for each checkout given, in turn,
--runs times each after one warm-up; wall and CPU seconds of each child (getrusage), medians.
Bytecode is compiled first (`compileall`), as an installed package has it.

    .venv/bin/python scripts/bench_import_time.py --trees . /tmp/old-worktree --runs 9
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

CODE = "import gym_metrics.collector, gym_metrics.cli._collect"


def once(tree: Path, code: str) -> tuple[float, float]:
    """(wall s, CPU s) of one child running `code` with `tree` first on its path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(".")])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--code", default=CODE, help="what the child runs")
    ns = parser.parse_args()
    trees = [t.resolve() for t in ns.trees]
    for tree in trees:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "gym_metrics")], check=True, stdout=subprocess.DEVNULL)
        once(tree, ns.code)  # warm-up: the page cache
    times: dict[Path, list[tuple[float, float]]] = {t: [] for t in trees}
    for _ in range(ns.runs):
        for tree in trees:
            times[tree].append(once(tree, ns.code))
    print(f"`python -c {ns.code!r}`, {ns.runs} runs each, in turn; medians; load {os.getloadavg()[0]:.2f}")
    print("| tree | wall s | CPU s |")
    print("|---|---:|---:|")
    for tree, runs in times.items():
        print(f"| {tree} | {statistics.median(w for w, _ in runs):.3f} | {statistics.median(c for _, c in runs):.3f} |")


if __name__ == "__main__":
    main()
