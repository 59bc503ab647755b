"""The server's CPU per rollout of a ported NeMo Gym environment, one tree of gym-metrics or
several side by side: what a change to the serving path costs, steadier than throughput.

    .venv/bin/python scripts/bench_verify_server_cpu.py --env xlam_fc --trees HEAD 5e2f5cb
    .venv/bin/python scripts/bench_verify_server_cpu.py --trees . --python /tmp/gm313/bin/python

Each tree (a git revision made a throwaway worktree, its compiled extensions copied from this
checkout; `.` is this checkout as it stands) serves the environment as `gym-metrics serve
<ported config.yaml> --port 0` (one worker), ported from the NeMo Gym 0.7.0 wheel (--wheel) by
this checkout. This checkout's collector verification drives every tree the same way
(bench_collect.timed_verify: make_batches of 256 + verify_all over one connection), over
bench_nemo_env.py's rows (the reference rollouts repeated, rewards checked row by row). Per run:
rollouts/s, and the server process's user+system CPU (/proc, every thread: grpc's too) per
rollout. One untimed run warms each server, after three GetServerInfo calls timed (the first
makes the environment's schemas); trees alternate run by run; medians.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import bench_nemo_env as bench  # noqa: E402
from bench_episodes import cpu_s  # noqa: E402
from bench_generate import Child  # noqa: E402


def worktree(rev: str, under: Path) -> Path:
    """A throwaway worktree of `rev` with this checkout's compiled extensions (untracked)."""
    if rev == ".":
        return ROOT
    tree = under / rev.replace("/", "_")
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(tree), rev], check=True, capture_output=True, timeout=120)
    for so in ROOT.glob("gym_metrics/**/*.so"):
        target = tree / so.relative_to(ROOT)
        if target.parent.is_dir():
            shutil.copy2(so, target)
    return tree


def info_ms(address: str) -> list[float]:
    """Milliseconds of three GetServerInfo calls in a row (the first makes the schemas)."""
    from gym_metrics._transport.client import ResourcesClient

    async def three() -> list[float]:
        out = []
        async with ResourcesClient(address) as client:
            for _ in range(3):
                start = time.perf_counter()
                await client.server_info()
                out.append(1e3 * (time.perf_counter() - start))
        return out

    return asyncio.run(three())


def one_run(address: str, pid: int, rows: list, expected: list[float]) -> tuple[float, float]:
    """(rollouts/s, server CPU microseconds a rollout) of verifying `rows` once."""
    before = cpu_s(pid)
    rate, rewards = asyncio.run(bench._gm_drive(address, rows))
    bench.check("gym-metrics", rewards, expected)
    return rate, 1e6 * (cpu_s(pid) - before) / len(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="xlam_fc", choices=bench.ENVS)
    parser.add_argument("--trees", nargs="+", default=["."], help="git revisions (or . for this checkout)")
    parser.add_argument("--rollouts", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs a tree (medians)")
    parser.add_argument("--wheel", type=Path, default=Path("/tmp/nemo/wheel"), help="the unzipped nemo-gym 0.7.0 wheel")
    parser.add_argument("--python", default=sys.executable, help="the servers' Python")
    ns = parser.parse_args()
    rows, expected = bench.build_rows(ns.env, ns.rollouts)
    results: dict[str, list[tuple[float, float]]] = {t: [] for t in ns.trees}
    with tempfile.TemporaryDirectory(prefix="bench_server_cpu_") as tmp:
        config = bench.port_envs(ns.wheel, [ns.env], Path(tmp))[ns.env]
        trees = {rev: worktree(rev, Path(tmp)) for rev in ns.trees}
        try:
            for run in range(ns.runs + 1):
                for rev, tree in trees.items():
                    cmd = [ns.python, "-m", "gym_metrics.cli", "--log-level", "warning", "serve", str(config), "--port", "0"]
                    # (the tree's gym_metrics first on the path: `-m` runs from its folder)
                    with Child(cmd, Child.LISTENING, timeout_s=60, cwd=tree, env=dict(os.environ, PYTHONPATH=str(tree))) as server:
                        if run == 0:
                            infos = ", ".join(f"{ms:.1f}" for ms in info_ms(server.found))
                            print(f"|   {rev}: GetServerInfo {infos} ms (three calls of a fresh server) |", flush=True)
                            one_run(server.found, server.proc.pid, rows[:2000], expected[:2000])  # warm-up
                            continue
                        results[rev].append(one_run(server.found, server.proc.pid, rows, expected))
                        rate, cpu = results[rev][-1]
                        print(f"|   {rev} run {run}: {rate:,.0f} rollouts/s, server {cpu:.0f} us CPU a rollout | {bench.load()} |", flush=True)
        finally:
            for tree in trees.values():
                if tree != ROOT:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True, timeout=120)
    print(f"\n{ns.env}, {ns.rollouts:,} rollouts, medians of {ns.runs} ({bench.version(ns.python)}, {bench.load()}):\n")
    print("| tree | rollouts/s | server CPU a rollout |\n|---|---:|---:|")
    for rev, runs in results.items():
        print(f"| {rev} | {statistics.median(r for r, _ in runs):,.0f} | {statistics.median(c for _, c in runs):.0f} us |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
