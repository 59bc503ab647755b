"""`collect --processes N` against one process (issue 42; figures in BENCHMARKS.md, "Several
collector processes"): bench_episodes.py's counter environment (`serve --workers 2`) and its
fast scripted policy (its own process, `--latency-s` per answer), and `gym-metrics collect` of
the same episode rows run as a user runs it, with 1 and with N processes, in turn, round after
round. Per run: wall seconds, episodes/s, and the CPU seconds of the whole collect process tree
per episode (getrusage of the waited-for children: the command and its shard processes).
Every run must give the same metrics file (checked).

    .venv/bin/python scripts/bench_collect_processes.py --episodes 4000 --concurrency 64 --rounds 3
    .venv/bin/python scripts/bench_collect_processes.py --episodes 16000 --concurrency 2000 --latency-s 1.0 --rounds 3
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import bench_episodes as episodes  # noqa: E402  (its environment, rows, policy and server children)


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(ns: argparse.Namespace, server: str, policy: str, rows: Path, out: Path, processes: int) -> tuple[float, float]:
    """One `gym-metrics collect`: (wall s, CPU s of its process tree)."""
    cmd = [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "collect", "--server", server, "--input", str(rows),
           "--output", str(out), "--policy-url", f"http://{policy}/v1", "--policy-model", "scripted", "--policy-api", "responses",
           "--policy-concurrency", str(ns.concurrency // processes), "--processes", str(processes)]  # fmt: skip
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"collect --processes {processes} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return wall, children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64, help="episodes in flight over all processes")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--latency-s", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=3)
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        work = Path(tmp)
        (work / "counter_env.py").write_text(episodes.COUNTER_ENV)
        rows = episodes.write_rows(work / "rows.jsonl", ns.episodes)
        with episodes.serve([f"{work / 'counter_env.py'}:Counter"], 2, max_sessions=max(10_000, 2 * ns.concurrency)) as server, \
                episodes.policy(ns.latency_s) as policy:  # fmt: skip
            figures: dict[int, list[tuple[float, float]]] = {1: [], ns.processes: []}
            metrics: set[bytes] = set()
            for round_ in range(ns.rounds):
                for processes in figures:
                    out = work / f"out_{processes}_{round_}.jsonl"
                    figures[processes].append(run(ns, server.found, policy.found, rows, out, processes))
                    metrics.add(out.with_name(out.stem + "_aggregate_metrics.json").read_bytes())
            assert len(metrics) == 1, "the runs' metrics files differ"
    print(f"{ns.episodes} episodes, {ns.concurrency} in flight, policy latency {ns.latency_s} s, {ns.rounds} rounds (medians); {episodes.load()}")
    print("| processes | wall s | episodes/s | collect CPU ms per episode |")
    print("|---:|---:|---:|---:|")
    for processes, runs in figures.items():
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"| {processes} | {wall:.2f} | {ns.episodes / wall:,.0f} | {1000 * cpu / ns.episodes:.2f} |")


if __name__ == "__main__":
    main()
