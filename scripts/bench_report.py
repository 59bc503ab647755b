"""The HTML report at scale: 125k tasks x 8 rollouts x 2 agents (issue 17).

Usage: python scripts/bench_report.py [--tasks 125000] [--repeats 8] [--agents 2] [--runs 3] [--quick]
       [--json FIGURES.json]

Writes a rollouts file (binary rewards with a per-task difficulty, token usage), aggregates it
with `gym-metrics aggregate` (rollout_infos included, as by default; not counted), then times
`gym-metrics report` in a fresh process (wall time, peak RSS, file size) and opens the page in
headless Chromium --runs times: the figure is DOMContentLoaded (navigation start to the end of
the event; the issue's goal is under 5 s), median of the runs. --quick: 20k tasks.
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

from gym_metrics.report import find_chromium, open_in_chromium


def write_rollouts(path: Path, tasks: int, repeats: int, agents: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(size=tasks)
    with path.open("wb") as f:
        for a in range(agents):
            passed = rng.uniform(size=(tasks, repeats)) < np.clip(difficulty + 0.02 * a, 0, 1)[:, None]
            tokens = rng.integers(100, 2000, size=(tasks, repeats))
            ref = orjson.dumps({"name": f"agent_{a}"})
            lines = [
                b'{"agent_ref":%s,"_ng_task_index":%d,"_ng_rollout_index":%d,"reward":%s,'
                b'"response":{"usage":{"input_tokens":200,"output_tokens":%d,"total_tokens":%d}}}\n'
                % (ref, t, r, b"1.0" if passed[t, r] else b"0.0", tokens[t, r], tokens[t, r] + 200)
                for t in range(tasks) for r in range(repeats)
            ]  # fmt: skip
            f.write(b"".join(lines))


def run(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one command in a fresh process."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return time.perf_counter() - started, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=125_000)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--agents", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="20k tasks")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--no-rollout-infos", action="store_true",
                        help="aggregate without rollout_infos; the report reads the rollouts file instead")  # fmt: skip
    ns = parser.parse_args()
    tasks = 20_000 if ns.quick else ns.tasks
    chromium = find_chromium()
    if chromium is None:
        print("no Chromium (apt-get install chromium)", file=sys.stderr)
        return 2
    load_start = os.getloadavg()
    print(f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load {load_start[0]:.2f}")
    gm = [sys.executable, "-m", "gym_metrics.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        rollouts = Path(tmp) / "bench.jsonl"
        write_rollouts(rollouts, tasks, ns.repeats, ns.agents)
        lean = ["--no-rollout-infos"] if ns.no_rollout_infos else []
        aggregate_s, _ = run([*gm, "aggregate", str(rollouts), "-q", *lean])
        metrics = Path(tmp) / "bench_aggregate_metrics.json"
        html = Path(tmp) / "bench_report.html"
        build_s, rss_mb = run([*gm, "report", str(metrics), *([str(rollouts)] if lean else []), "-o", str(html)])
        loads = [open_in_chromium(html, binary=chromium) for _ in range(ns.runs)]
        figures = {
            "tasks": tasks, "repeats": ns.repeats, "agents": ns.agents, "rollout_infos": not lean,
            "metrics_mb": metrics.stat().st_size / 1e6, "aggregate_s": aggregate_s,
            "report_build_s": build_s, "report_peak_rss_mb": rss_mb, "report_mb": html.stat().st_size / 1e6,
            "dom_content_loaded_ms": statistics.median(p.dom_content_loaded_ms for p in loads),
            "dom_content_loaded_ms_runs": [p.dom_content_loaded_ms for p in loads],
            "load_event_ms": statistics.median(p.load_ms for p in loads),
            "console_errors": sum(len(p.console_errors) for p in loads), "requests": sum(len(p.requests) for p in loads),
            "load_average": [round(x, 2) for x in (*load_start, *os.getloadavg())],
        }  # fmt: skip
    source = "rollouts JSONL (metrics without rollout_infos)" if lean else "the metrics' rollout_infos"
    print(f"{tasks:,} tasks x {ns.repeats} x {ns.agents} agents, per-rollout values from {source}; "
          f"metrics file {figures['metrics_mb']:.0f} MB, "
          f"aggregate {aggregate_s:.2f} s (not counted)")  # fmt: skip
    print(f"gym-metrics report: {build_s:.2f} s wall (fresh process), peak RSS {rss_mb:.0f} MB, "
          f"file {figures['report_mb']:.2f} MB")  # fmt: skip
    runs = ", ".join(f"{p.dom_content_loaded_ms:.0f}" for p in loads)
    print(f"headless Chromium: DOMContentLoaded {figures['dom_content_loaded_ms']:.0f} ms median ({runs}); load event "
          f"{figures['load_event_ms']:.0f} ms; console errors {figures['console_errors']}, requests {figures['requests']}")  # fmt: skip
    print(f"load at end {os.getloadavg()[0]:.2f}")
    if ns.json:
        ns.json.write_bytes(orjson.dumps(figures, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
