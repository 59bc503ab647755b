"""Benchmark the collector and the verify RPCs on loopback; prints a Markdown table.

Usage: python scripts/bench_collect.py [--only collect workers math e2e unary] [--rounds 3]
       [--rollouts 1000000] [--verify-rollouts 100000] [--cpu-rollouts 20000] [--unary-calls 3000]

(a) `gym-metrics collect` on a rollouts file whose rows already carry rewards, end to end
    (read, copy, AggregateMetrics, write), against `gym-metrics serve math_exact` in another
    process, beside an in-process `gym-metrics aggregate --env math_exact` of the same file
    (alternating runs, medians, and their ratio; issue 12 wants at most 1.5x); the collector's
    peak RSS.
(b) Verification throughput with the collector's own machinery (make_batches + verify_all over
    one connection per server worker), bodies encoded before the clock starts:
    `workers`: a CPU-bound verify (scripts/bench_cpu_env.py, ~200 us of CPU per rollout),
    `serve --workers 1` vs `--workers 2` alternating, medians and their ratio (target >= 1.6x);
    `math`: math_exact with `--workers 1` and `--workers 2` (target >= 60k rollouts/s with 2 on
    a quiet machine); `e2e`: `gym-metrics collect` of --verify-rollouts unverified math_exact
    rows end to end (the collector's own reading, writing and aggregation included).
(c) unary Verify calls/s, one call at a time and 16 concurrent.

Each figure is printed with the load average (`uptime`'s three numbers): per run, taken just
before it; beside a median, taken after the runs.
Every run is bounded (subprocess timeouts, asyncio.wait_for).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_aggregate import make_rollouts  # noqa: E402
from bench_generate import Child  # noqa: E402


RUN_TIMEOUT_S = 300
"""No single run may take longer than this."""


def load() -> str:
    """The load average as `uptime` prints it (1, 5, 15 minutes)."""
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


class Server(Child):
    """`gym-metrics serve TARGET --port 0 [--workers N]` in a child process."""

    def __init__(self, target: str, workers: int = 1) -> None:
        cmd = [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "serve", target, "--port", "0"]
        super().__init__(cmd + ["--workers", str(workers)] * (workers > 1), Child.LISTENING)


def bench_collect(src: Path, data_dir: Path, workers: int = 1) -> tuple[float, float]:
    """(wall s, peak RSS MB) of `collect` of `src` against `serve math_exact [--workers N]`."""
    out = data_dir / "collected.jsonl"
    with Server("math_exact", workers) as server:
        out.unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "--_collect", server.found, str(src), str(out)]
        res = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        wall, rss = map(float, res.stdout.split())
        return wall, rss


def bench_aggregate(src: Path, data_dir: Path) -> float:
    """Wall s of an in-process `gym-metrics aggregate --env math_exact` of `src` (CLI start included)."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "aggregate", str(src), "-o", str(data_dir / "aggregated.json"),
         "--env", "math_exact"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    return time.perf_counter() - start


def _collect_child(address: str, src: str, out: str) -> None:
    """Run the CLI in a grandchild so RUSAGE_CHILDREN is its peak alone."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "collect", "--server", address, "--input", src, "--output", out],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=RUN_TIMEOUT_S,
    )
    wall = time.perf_counter() - start
    print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def _sample_bodies() -> list[dict]:
    sample = ROOT / "gym_metrics_servers" / "math_exact" / "sample.jsonl"
    return [orjson.loads(line) for line in sample.read_bytes().splitlines() if line.strip()]


def math_body(i: int, bodies: list[dict]) -> dict:
    """A sample body with a fresh answer per task (8 rollouts each, 3 of them wrong), so
    math_exact's answer caches only help as they would on real data."""
    task, rollout = divmod(i, 8)
    body = dict(bodies[i % len(bodies)], _ng_task_index=task, _ng_rollout_index=rollout)
    answer = task * 7 + 3 if rollout < 5 else task * 7 + 4
    text = f"Step by step, the total is \\boxed{{{answer}}}."
    body["response"] = {"output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}]}
    body["expected_answer"] = str(task * 7 + 3)
    return body


def make_rows(kind: str, n: int) -> list[dict]:
    """`n` verify request rows for `math` (math_exact) or `burn` (bench_cpu_env)."""
    if kind == "math":
        bodies = _sample_bodies()
        return [math_body(i, bodies) for i in range(n)]
    return [{"agent_ref": {"name": "a"}, "_ng_task_index": i // 8, "_ng_rollout_index": i % 8} for i in range(n)]


async def timed_verify(address: str, rows: list[dict], on_results: Callable[[list, Any], None]) -> tuple[float, int]:
    """(seconds, connections) of the collector's verification of `rows` (make_batches +
    verify_all over one connection per server worker; batches encoded and one verify made to
    warm up before the clock starts). `on_results(batch, verified)` sees each answered batch
    (a batch item's rollout has `line`, the row's position)."""
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics.cli._collect import fewer_gc_passes
    from gym_metrics.collector._input import Rollout
    from gym_metrics.collector._verify import make_batches, verify_all

    rollouts = [
        Rollout(r.get("agent_ref", {}).get("name", "a"), r["_ng_task_index"], r["_ng_rollout_index"], r, False, line=i)
        for i, r in enumerate(rows)
    ]
    batches = list(make_batches(iter(rollouts), 256, 4 << 20))
    async with ResourcesClient(address) as client:
        await client.verify(orjson.dumps(rows[0]).decode())  # warm up
        lanes = await client.open_connections()
        try:
            start = time.perf_counter()
            with fewer_gc_passes():  # as `gym-metrics collect` runs
                await asyncio.wait_for(verify_all(lanes, iter(batches), on_results), RUN_TIMEOUT_S)
            elapsed = time.perf_counter() - start
        finally:
            for extra in lanes[1:]:
                await extra.close()
    return elapsed, len(lanes)


async def verify_rate(address: str, rows: list[dict], expect_correct: Callable[[int], bool]) -> tuple[float, int]:
    """(rollouts/s, connections) of the collector's verification (timed_verify)."""
    correct = done = 0

    def on_results(batch: list, verified: Any) -> None:
        nonlocal correct, done
        done += len(batch)
        correct += sum(reward == 1.0 for reward in verified.reward)

    elapsed, lanes = await timed_verify(address, rows, on_results)
    assert done == len(rows) and correct == sum(map(expect_correct, range(len(rows)))), "verification went wrong"
    return len(rows) / elapsed, lanes


async def bench_unary(n: int, address: str, concurrency: int) -> float:
    from gym_metrics._transport.client import ResourcesClient

    body = orjson.dumps(_sample_bodies()[0]).decode()
    async with ResourcesClient(address) as client:
        await client.verify(body)  # warm up
        start = time.perf_counter()

        async def worker(k: int) -> None:
            for _ in range(k):
                await client.verify(body)

        per = n // concurrency
        await asyncio.gather(*(worker(per) for _ in range(concurrency)))
        return per * concurrency / (time.perf_counter() - start)


def part_collect(ns: argparse.Namespace) -> None:
    """(a): collect vs in-process aggregate of the same pre-rewarded file, alternating."""
    src = ns.data_dir / f"rollouts_{ns.rollouts}.jsonl"
    if not src.exists():
        make_rollouts(src, ns.rollouts)
    collect_s, aggregate_s, rss = [], [], []
    for k in range(ns.rounds):
        loads = load()
        wall, peak = bench_collect(src, ns.data_dir)
        agg = bench_aggregate(src, ns.data_dir)
        collect_s.append(wall), aggregate_s.append(agg), rss.append(peak)
        print(f"|   round {k + 1}: collect {wall:.2f} s, aggregate {agg:.2f} s | {loads} |", flush=True)
    c, a = statistics.median(collect_s), statistics.median(aggregate_s)
    print(f"| (a) collect, {ns.rollouts:,} already-scored rollouts, against serve math_exact | {c:.2f} s wall "
          f"(median of {ns.rounds}), {max(rss):.0f} MB peak RSS | {load()} |")
    print(f"| (a) aggregate --env math_exact, same file, in-process | {a:.2f} s wall | collect / aggregate = {c / a:.2f}x |")


def part_verify(ns: argparse.Namespace, kind: str) -> None:
    """(b): verification throughput with --workers 1 and 2, alternating; medians and ratio."""
    n = ns.cpu_rollouts if kind == "burn" else ns.verify_rollouts
    target = f"{ROOT / 'scripts' / 'bench_cpu_env.py'}:BurnServer" if kind == "burn" else "math_exact"
    label = "CPU-bound verify (~200 us/rollout)" if kind == "burn" else "math_exact verify"
    rows = make_rows(kind, n)
    correct = (lambda i: True) if kind == "burn" else (lambda i: i % 8 < 5)
    rates: dict[int, list[float]] = {1: [], 2: []}
    for k in range(ns.rounds):
        for workers in (1, 2) if k % 2 == 0 else (2, 1):
            loads = load()
            with Server(target, workers) as server:
                rate, lanes = asyncio.run(verify_rate(server.found, rows, correct))
            rates[workers].append(rate)
            line = f"|   round {k + 1}, --workers {workers} ({lanes} connections): {rate:,.0f} rollouts/s"
            print(f"{line} | {loads} |", flush=True)
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"| (b) {label}, {n:,} rollouts, --workers 1 | {one:,.0f} rollouts/s (median of {ns.rounds}) | {load()} |")
    print(f"| (b) {label}, {n:,} rollouts, --workers 2 | {two:,.0f} rollouts/s (median of {ns.rounds}) | "
          f"workers 2 / workers 1 = {two / one:.2f}x |")


def part_end_to_end(ns: argparse.Namespace) -> None:
    """`gym-metrics collect` of unverified math_exact rows, end to end (CLI start, read, verify,
    write, AggregateMetrics, metrics file), --workers 1 and 2 alternating."""
    src = ns.data_dir / f"to_verify_{ns.verify_rollouts}.jsonl"
    if not src.exists():
        with src.open("wb") as f:
            f.writelines(orjson.dumps(row) + b"\n" for row in make_rows("math", ns.verify_rollouts))
    walls: dict[int, list[float]] = {1: [], 2: []}
    for k in range(ns.rounds):
        for workers in (1, 2) if k % 2 == 0 else (2, 1):
            loads = load()
            wall, _ = bench_collect(src, ns.data_dir, workers)
            walls[workers].append(wall)
            print(f"|   round {k + 1}, --workers {workers}: {wall:.2f} s | {loads} |", flush=True)
    for workers, runs in walls.items():
        wall = statistics.median(runs)
        print(f"| (b) collect {ns.verify_rollouts:,} unverified math_exact rows end to end, --workers {workers} | "
              f"{wall:.2f} s, {ns.verify_rollouts / wall:,.0f} rollouts/s (median of {ns.rounds}) | {load()} |")


def part_unary(ns: argparse.Namespace) -> None:
    """(c): unary Verify calls/s against serve math_exact."""
    with Server("math_exact") as server:
        loads = load()
        one = asyncio.run(bench_unary(ns.unary_calls, server.found, 1))
        many = asyncio.run(bench_unary(ns.unary_calls, server.found, 16))
    print(f"| (c) unary Verify, {ns.unary_calls:,} calls | {one:,.0f} calls/s sequential, "
          f"{many:,.0f} calls/s 16 concurrent | {loads} |")


PARTS = ("collect", "workers", "math", "e2e", "unary")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS), help="run only these parts")
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs per comparison (medians)")
    parser.add_argument("--rollouts", type=int, default=1_000_000)
    parser.add_argument("--verify-rollouts", type=int, default=100_000)
    parser.add_argument("--cpu-rollouts", type=int, default=20_000)
    parser.add_argument("--unary-calls", type=int, default=3000)
    parser.add_argument("--data-dir", type=Path, default=Path("bench_data"))
    ns = parser.parse_args()
    ns.data_dir.mkdir(exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    if "collect" in ns.only:
        part_collect(ns)
    if "workers" in ns.only:
        part_verify(ns, "burn")
    if "math" in ns.only:
        part_verify(ns, "math")
    if "e2e" in ns.only:
        part_end_to_end(ns)
    if "unary" in ns.only:
        part_unary(ns)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--_collect":
        _collect_child(*sys.argv[2:])
        sys.exit(0)
    sys.exit(main())
