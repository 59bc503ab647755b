"""`collect --processes N` against one process (issue 42; figures in BENCHMARKS.md, "Several
collector processes"): bench_episodes.py's counter environment (`serve --workers 2`) and its
fast scripted policy (its own process, `--latency-s` per answer), and `gym-metrics collect` of
the same episode rows run as a user runs it, with 1 and with N processes, in turn, round after
round. Per run: wall seconds, episodes/s, and the CPU seconds of the whole collect process tree
per episode (getrusage of the waited-for children: the command and its shard processes).
Every run must give the same metrics file (checked). Episode times (p50/p99: from an episode's
SeedSession to its Verify's answer, EpisodeRunner._episode) are recorded in every collect process
(shards included) by a `sitecustomize` this script puts on their PYTHONPATH; gym_metrics is not
changed. `--before TREE` adds the same runs of another checkout (say a `git worktree` of the
commit before a change) for a before/after table.

    .venv/bin/python scripts/bench_collect_processes.py --episodes 4000 --concurrency 64 --rounds 3
    .venv/bin/python scripts/bench_collect_processes.py --episodes 16000 --concurrency 2000 --latency-s 1.0 --rounds 3
    .venv/bin/python scripts/bench_collect_processes.py --episodes 4000 --concurrency 4000 --latency-s 1.0 --rounds 1 \
        --processes 1 --wrap 'strace -c -f -o {out}.strace' --keep /tmp/traces
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import bench_episodes as episodes  # noqa: E402  (its environment, rows, policy and server children)


TIMING = """
import atexit, os, time
from gym_metrics.collector import _episodes

_durations = []
_original = _episodes.EpisodeRunner._episode


async def _timed(self, client, rollout):
    start = time.perf_counter()
    answer = await _original(self, client, rollout)
    _durations.append(time.perf_counter() - start)
    return answer


_episodes.EpisodeRunner._episode = _timed


@atexit.register
def _dump():
    if _durations:
        with open(os.path.join(os.environ["BENCH_DURATIONS"], f"{os.getpid()}.txt"), "w") as f:
            f.write("\\n".join(map(repr, _durations)))
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(ns: argparse.Namespace, server: Any, policy: Any, rows: Path, out: Path, processes: int, tree: Path) -> tuple[float, float, list[float], float, float]:
    """One `gym-metrics collect` of the checkout `tree`: (wall s, CPU s of its process tree,
    the episode times, CPU s of the server, of the policy)."""
    cmd = [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "collect", "--server", server.found, "--input", str(rows),
           "--output", str(out), "--policy-url", f"http://{policy.found}/v1", "--policy-model", "scripted", "--policy-api", "responses",
           "--policy-concurrency", str(ns.concurrency // processes), "--processes", str(processes)]  # fmt: skip
    if ns.wrap:  # a profiler or tracer in front of the collect command, its file beside the output
        cmd = ns.wrap.replace("{out}", str(out.with_suffix(""))).split() + cmd
    hooks, durations = out.parent / "hooks", out.with_suffix(".durations")
    hooks.mkdir(exist_ok=True)
    (hooks / "sitecustomize.py").write_text(TIMING)
    durations.mkdir()
    env = {**os.environ, "PYTHONPATH": f"{hooks}:{tree}", "BENCH_DURATIONS": str(durations)}
    others = episodes.cpu_s(server.proc.pid), episodes.cpu_s(policy.proc.pid)
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, env=env, cwd=tree)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"collect --processes {processes} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    times = [float(x) for f in durations.iterdir() for x in f.read_text().split()]
    assert len(times) == ns.episodes, f"{len(times)} episode times for {ns.episodes} episodes"
    cpu = children_cpu() - cpu
    return wall, cpu, times, episodes.cpu_s(server.proc.pid) - others[0], episodes.cpu_s(policy.proc.pid) - others[1]


@contextlib.contextmanager
def counter_run(ns: argparse.Namespace, prefix: str) -> Iterator[tuple[Path, Path, Any, Any]]:
    """(work folder, rows, server, policy): --episodes rows of the counter environment in a new
    folder, `serve --workers 2` of it and the scripted policy answering after --latency-s."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp)
        (work / "counter_env.py").write_text(episodes.COUNTER_ENV)
        rows = episodes.write_rows(work / "rows.jsonl", ns.episodes)
        with episodes.serve([f"{work / 'counter_env.py'}:Counter"], 2, max_sessions=max(10_000, 2 * ns.concurrency)) as server, \
                episodes.policy(ns.latency_s) as policy:  # fmt: skip
            yield work, rows, server, policy


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=64, help="episodes in flight over all processes")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--latency-s", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="another checkout, run the same way beside this one")
    parser.add_argument("--wrap", default="", help="a command put in front of each collect, {out} its output's stem "
                        "(e.g. 'strace -c -f -o {out}.strace' or 'py-spy record --gil -o {out}.svg --'); --keep to read the files")
    parser.add_argument("--keep", type=Path, help="copy the runs' files (outputs, --wrap's) into this folder")
    ns = parser.parse_args()
    trees = {"this": Path(__file__).resolve().parent.parent, **({"before": ns.before.resolve()} if ns.before else {})}
    variants = [(label, processes) for label in trees for processes in dict.fromkeys((1, ns.processes))]
    with counter_run(ns, "bench-processes-") as (work, rows, server, policy):
        figures: dict[tuple[str, int], list[tuple[float, float, list[float], float, float]]] = {v: [] for v in variants}
        metrics: set[bytes] = set()
        for round_ in range(ns.rounds):
            for label, processes in variants:
                out = work / f"out_{label}_{processes}_{round_}.jsonl"
                figures[label, processes].append(run(ns, server, policy, rows, out, processes, trees[label]))
                metrics.add(out.with_name(out.stem + "_aggregate_metrics.json").read_bytes())
        assert len(metrics) == 1, "the runs' metrics files differ"
        if ns.keep:
            shutil.copytree(work, ns.keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("hooks", "*.durations"))
    print(f"{ns.episodes} episodes, {ns.concurrency} in flight, policy latency {ns.latency_s} s, {ns.rounds} rounds (medians); {episodes.load()}")
    print("| code | processes | wall s | episodes/s | episode p50 s | episode p99 s | CPU ms per episode: collect, server, policy |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (label, processes), runs in figures.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        p50 = statistics.median(episodes.pct(r[2], 0.5) for r in runs)
        p99 = statistics.median(episodes.pct(r[2], 0.99) for r in runs)
        serve = statistics.median(r[3] for r in runs)
        answer = statistics.median(r[4] for r in runs)
        cpus = ", ".join(f"{1000 * c / ns.episodes:.2f}" for c in (cpu, serve, answer))
        print(f"| {label} | {processes} | {wall:.2f} | {ns.episodes / wall:,.0f} | {p50:.2f} | {p99:.2f} | {cpus} |")


if __name__ == "__main__":
    main()
