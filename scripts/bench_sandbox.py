"""Benchmark the sandbox (issue 29): runs per second of a trivial program, cold and warm, p50 and
p99, and the cost of each isolation layer on its own. Prints Markdown tables.

Usage: python scripts/bench_sandbox.py [--runs 300] [--rounds 3] [--concurrency 1 4] [--verifies 2000]

The program reads a line and prints it (`print(input())`), as Python source (run in the forked
launcher) or as a command (`python -I -S -c ...`, an interpreter start). Every run's output is
checked. Configurations, each measured --rounds times interleaved (the machine is shared: the
medians of the rounds are quoted):

- `spawn`: asyncio.create_subprocess_exec of the command, no sandbox at all (the floor a cold
  sandbox adds to);
- `cold`: run_local, a launcher (and bubblewrap) started for each run;
- `warm`: Pool.run, launchers started ahead, with the layers added one at a time:
  `rlimits` (no user of its own, no namespaces), `+user` (a uid per run, as root), `strict`
  (the default: bubblewrap, and per run namespaces, a tmpfs, the seccomp filter and a cgroup).

With --verifies N: N code_tests verifies at once (one stdin/stdout test each, a correct
program) through a real gRPC server on loopback, in this process: verifies/s and latency.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from gym_metrics.sandbox import Limits, Pool, Program, RunResult, bwrap_path, run_local

LINE = b"hello sandbox\n"
SOURCE = Program(python="print(input())", stdin=LINE)
COMMAND = Program([sys.executable, "-I", "-S", "-c", "print(input())"], stdin=LINE)


async def spawn(program: Program) -> RunResult:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(*program.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate(program.stdin)
    return RunResult(proc.returncode, out, b"", False, "exit", None, time.perf_counter() - started, 0.0, 0, False)


async def measure(run: Callable[[], Awaitable[RunResult]], runs: int, concurrency: int) -> dict[str, float]:
    """runs/s and latency percentiles of `runs` runs, `concurrency` at once."""
    latencies: list[float] = []

    async def one() -> None:
        started = time.perf_counter()
        result = await run()
        latencies.append(time.perf_counter() - started)
        assert result.stdout == LINE, result

    for _ in range(5):  # warm-up
        await one()
    latencies.clear()
    started = time.perf_counter()
    queue = iter(range(runs))

    async def lane() -> None:
        for _ in queue:
            await one()

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    latencies.sort()
    return {"rate": runs / elapsed, "p50": latencies[len(latencies) // 2] * 1e3, "p99": latencies[int(len(latencies) * 0.99)] * 1e3}


async def configuration(name: str, program: Program, runs: int, concurrency: int) -> dict[str, float]:
    if name == "spawn":
        return await measure(lambda: spawn(program), runs, concurrency)
    if name == "cold":
        return await measure(lambda: run_local(program, Limits()), runs, concurrency)
    isolation, users = {"rlimits": ("none", False), "+user": ("none", True), "strict": ("strict", True)}[name]
    pool = Pool(size=max(concurrency, 2), isolation=isolation, users=users)  # type: ignore[arg-type]
    await pool.start()
    try:
        return await measure(lambda: pool.run(program), runs, concurrency)
    finally:
        await pool.aclose()


async def verifies(n: int) -> dict[str, float]:
    from gym_metrics import ResourcesClient
    from gym_metrics.testing import serve_environment
    from gym_metrics_servers.code_tests import CodeTestsServer

    def body(i: int) -> dict[str, Any]:
        text = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
        return {"response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}]},
                "tests": [{"input": f"{i} {i}\n", "output": str(2 * i)}]}  # fmt: skip

    env = CodeTestsServer()
    latencies: list[float] = []
    async with serve_environment(env) as server, ResourcesClient(server.address) as client:
        await client.verify(body(0))

        async def one(i: int) -> None:
            started = time.perf_counter()
            assert (await client.verify(body(i)))["reward"] == 1.0
            latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(n)))
        elapsed = time.perf_counter() - started
    await env.pool.aclose()
    latencies.sort()
    return {"rate": n / elapsed, "p50": latencies[len(latencies) // 2] * 1e3, "p99": latencies[int(len(latencies) * 0.99)] * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--verifies", type=int, default=0)
    args = parser.parse_args()
    if args.verifies:
        results = [asyncio.run(verifies(args.verifies)) for _ in range(args.rounds)]
        med = {k: statistics.median(r[k] for r in results) for k in ("rate", "p50", "p99")}
        print(f"{args.verifies} code_tests verifies at once: {med['rate']:,.0f} verifies/s, p50 {med['p50']:,.0f} ms, p99 {med['p99']:,.0f} ms")
        return
    print(f"bubblewrap: {bwrap_path() or 'not installed'}; {args.runs} runs x {args.rounds} rounds, medians of the rounds\n")
    rows: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    plan = [(kind, program, name) for kind, program in (("source", SOURCE), ("command", COMMAND))
            for name in ("spawn", "cold", "rlimits", "+user", "strict") if not (name == "spawn" and kind == "source")]  # fmt: skip
    for _ in range(args.rounds):
        for concurrency in args.concurrency:
            for kind, program, name in plan:
                cold_runs = max(20, args.runs // 5) if name == "cold" else args.runs
                rows.setdefault((kind, name, concurrency), []).append(asyncio.run(configuration(name, program, cold_runs, concurrency)))
    print("| program | configuration | at once | runs/s | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|")
    for (kind, name, concurrency), results in rows.items():
        med: dict[str, Any] = {k: statistics.median(r[k] for r in results) for k in ("rate", "p50", "p99")}
        print(f"| {kind} | {name} | {concurrency} | {med['rate']:,.0f} | {med['p50']:.1f} | {med['p99']:.1f} |")


if __name__ == "__main__":
    main()
