"""Benchmark the collector and the verify RPCs on loopback; prints a Markdown table.

Usage: python scripts/bench_collect.py [--rollouts 1000000] [--verify-rollouts 100000] [--unary-calls 3000]

(a) `gym-metrics collect` on a rollouts file whose rows already carry rewards, end to end
    (read, copy, AggregateMetrics, write), against `gym-metrics serve` in another process;
    wall time and the collector's peak RSS.
(b) math_exact verification through VerifyStream: rollouts/s, client and server on this machine.
(c) unary Verify calls/s, one call at a time and 16 concurrent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_aggregate import make_rollouts  # noqa: E402


class Server:
    """`gym-metrics serve TARGET --port 0` in a child process; the port is read from stderr."""

    def __init__(self, target: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "serve", target, "--port", "0"],
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        assert self.proc.stderr is not None
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            found = re.search(r"listening on (\S+:\d+)", line)
            if found:
                self.address = found.group(1)
                return
        raise RuntimeError("server did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def bench_collect(n: int, data_dir: Path) -> tuple[float, float]:
    src = data_dir / f"rollouts_{n}.jsonl"
    if not src.exists():
        make_rollouts(src, n)
    out = data_dir / f"collected_{n}.jsonl"
    server = Server("gym_metrics.server:SimpleResourcesServer")
    try:
        out.unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "--_collect", server.address, str(src), str(out)]
        res = subprocess.run(cmd, check=True, capture_output=True, text=True)
        wall, rss = map(float, res.stdout.split())
        return wall, rss
    finally:
        server.stop()


def _collect_child(address: str, src: str, out: str) -> None:
    """Run the CLI in a grandchild so RUSAGE_CHILDREN is its peak alone."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "collect", "--server", address, "--input", src, "--output", out],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)


def _sample_bodies() -> list[dict]:
    sample = ROOT / "servers" / "math_exact" / "sample.jsonl"
    return [orjson.loads(line) for line in sample.read_bytes().splitlines() if line.strip()]


async def bench_verify_stream(n: int, address: str, batch_size: int = 512) -> float:
    from gym_metrics._transport._client import ResourcesClient

    bodies = _sample_bodies()

    def body_for(i: int) -> bytes:
        """A sample body with a fresh answer per task (8 rollouts each, 3 of them wrong), so
        math_exact's answer caches only help as they would on real data."""
        task, rollout = divmod(i, 8)
        body = dict(bodies[i % len(bodies)], _ng_task_index=task, _ng_rollout_index=rollout)
        answer = task * 7 + 3 if rollout < 5 else task * 7 + 4
        text = f"Step by step, the total is \\boxed{{{answer}}}."
        body["response"] = {"output": [{"type": "message", "content": [{"type": "output_text", "text": text}]}]}
        body["expected_answer"] = str(task * 7 + 3)
        return orjson.dumps(body)

    async def batches():  # type: ignore[no-untyped-def]
        for b in range(0, n, batch_size):
            yield str(b), [(i // 8, i % 8, body_for(i)) for i in range(b, min(b + batch_size, n))]

    async with ResourcesClient(address) as client:
        start = time.perf_counter()
        done = correct = 0
        async for _, outcomes in client.verify_batches(batches()):
            done += len(outcomes)
            correct += sum(o.reward == 1.0 for o in outcomes)
        elapsed = time.perf_counter() - start
    assert done == n and correct == sum(1 for i in range(n) if i % 8 < 5), "verification went wrong"
    return n / elapsed


async def bench_unary(n: int, address: str, concurrency: int) -> float:
    from gym_metrics._transport._client import ResourcesClient

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rollouts", type=int, default=1_000_000)
    parser.add_argument("--verify-rollouts", type=int, default=100_000)
    parser.add_argument("--unary-calls", type=int, default=3000)
    parser.add_argument("--data-dir", type=Path, default=Path("bench_data"))
    ns = parser.parse_args()
    ns.data_dir.mkdir(exist_ok=True)
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}\n")
    wall, rss = bench_collect(ns.rollouts, ns.data_dir)
    print(f"| (a) collect, {ns.rollouts:,} already-scored rollouts | {wall:.2f} s wall | {rss:.0f} MB peak RSS |")
    server = Server("math_exact")
    try:
        rate = asyncio.run(bench_verify_stream(ns.verify_rollouts, server.address))
        print(f"| (b) math_exact VerifyStream, {ns.verify_rollouts:,} rollouts | {rate:,.0f} rollouts/s | |")
        one = asyncio.run(bench_unary(ns.unary_calls, server.address, 1))
        many = asyncio.run(bench_unary(ns.unary_calls, server.address, 16))
        print(f"| (c) unary Verify, {ns.unary_calls:,} calls | {one:,.0f} calls/s sequential | {many:,.0f} calls/s 16 concurrent |")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--_collect":
        _collect_child(*sys.argv[2:])
        sys.exit(0)
    sys.exit(main())
