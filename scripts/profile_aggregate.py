"""Where `gym-metrics aggregate`'s time goes: wall and CPU of each stage of `aggregate_file`.

Usage: python scripts/profile_aggregate.py ROLLOUTS.jsonl [--runs 2] [--render-workers N] [--python-render]

Stages: imports, reading, the engine until the render worker is forked, the rest of the engine,
writing (this process's share of the render, appending the worker's part, the rename). CPU is
this process's only (the forked worker's is not counted). The figures behind BENCHMARKS.md's
"Where the 1M run's time goes". `--render-workers 1`: the whole render in this process (its
CPU is then the render's); `--python-render`: without the C modules (_fill, _minify), as an
install without a C compiler renders.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

START = time.perf_counter()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("rollouts", type=Path)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--render-workers", type=int, help="GYM_METRICS_RENDER_WORKERS (1: no forked worker)")
    parser.add_argument("--python-render", action="store_true", help="render without the C modules")
    ns = parser.parse_args()
    if ns.render_workers is not None:
        os.environ["GYM_METRICS_RENDER_WORKERS"] = str(ns.render_workers)
    marks: list[tuple[str, float, float]] = []

    def mark(name: str) -> None:
        t = os.times()
        marks.append((name, time.perf_counter(), t.user + t.system))

    import gym_metrics.aggregate as agg
    from gym_metrics.aggregate import _canonical
    from gym_metrics.aggregate.render import _forked, _texts

    if ns.python_render:
        _texts._native, _canonical._minify = None, None
    mark("imports")
    read, write, spawn = agg.read_rollouts, agg.write_aggregate_metrics, _forked._spawn

    def timed_read(*a: Any, **k: Any) -> Any:
        out = read(*a, **k)
        mark("read")
        return out

    def timed_write(*a: Any, **k: Any) -> Any:
        mark("engine after the fork")
        out = write(*a, **k)
        mark("write")
        return out

    def timed_spawn(*a: Any) -> Any:
        mark("engine until the fork")
        return spawn(*a)

    agg.read_rollouts, agg.write_aggregate_metrics, _forked._spawn = timed_read, timed_write, timed_spawn
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(ns.runs):
            marks[:] = marks[:1] if run == 0 else [("start", time.perf_counter(), sum(os.times()[:2]))]
            agg.aggregate_file(ns.rollouts, Path(tmp) / "out.json", keep_rows=False)
            previous = (START, 0.0) if run == 0 else marks[0][1:]
            for name, wall, cpu in marks[1 if run else 0 :]:
                print(f"run {run + 1}  {name:24s} wall {wall - previous[0]:.3f} s  cpu {cpu - previous[1]:.3f} s")
                previous = (wall, cpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
