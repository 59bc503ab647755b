"""Benchmark `collect` against a verify with a slow tail: 1% of verifies take 2 s (a judge's retry,
a timeout), the others 10 ms. Answered whole and in order, one slow verify held its batch and
every batch behind it; answered rollout by rollout (`answer_each`) it holds back only itself.

Usage: python scripts/bench_slow_tail.py [--rows 10000] [--rounds 3] [--baseline DIR] [--math N]

Each run starts `serve scripts/bench_slow_tail.py:TailServer` and runs `collect` of --rows rows
through it, both from this tree, then (with --baseline, a checkout of an older commit) both from
that tree, alternating; prints each run, the medians, their ratio and the ideal time (the
verify work over the server's 64 concurrent verifies). With --math N, no verify is slow: N
unrewarded math_exact rows (bench_collect.py's) through `serve math_exact` instead, for what the
change costs where nothing waits. Every run is bounded by a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, SimpleResourcesServer

ROOT = Path(__file__).resolve().parent.parent
SLOW_S, FAST_S, SLOW_SHARE = 2.0, 0.01, 0.01
CONCURRENT_VERIFIES = 64
"""The server's default concurrent verifies per stream (EnvironmentHandler)."""
RUN_TIMEOUT_S = 300


def is_slow(text: str) -> bool:
    """1 in 100 rows by a hash of its prompt (the same rows slow in every run)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=2).digest(), "big") % 100 == 0


class TailServer(SimpleResourcesServer):
    """Reward 1.0 after FAST_S, or SLOW_S for 1% of rows."""

    name = "bench_tail"

    async def verify(self, body: BaseVerifyRequest) -> BaseVerifyResponse:
        prompt = body.model_dump(mode="json")["responses_create_params"]["input"][0]["content"]
        await asyncio.sleep(SLOW_S if is_slow(prompt) else FAST_S)
        return BaseVerifyResponse(reward=1.0)


def write_rows(path: Path, n: int) -> int:
    """`n` answered rows; returns how many are slow."""
    slow = 0
    with path.open("wb") as f:
        for i in range(n):
            prompt = [{"role": "user", "content": f"q{i}"}]
            slow += is_slow(f"q{i}")
            row = {"responses_create_params": {"input": prompt}, "agent_ref": {"name": "a"},
                   "response": {"id": f"r{i}", "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]}]}}  # fmt: skip
            f.write(orjson.dumps(row) + b"\n")
    return slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(tree: Path, rows: Path, work: Path, target: str) -> float:
    """serve `target` + collect from `tree`; the collect's wall seconds."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    port = free_port()
    cli = [sys.executable, "-m", "gym_metrics.cli"]
    server = subprocess.Popen([*cli, "serve", target, "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tree)  # fmt: skip
    try:
        for _ in range(200):  # bounded: 20 s until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.1)
        out = work / f"out{port}.jsonl"
        started = time.perf_counter()
        done = subprocess.run([*cli, "collect", "--server", f"127.0.0.1:{port}", "--input", str(rows), "--output", str(out)],
                              env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=tree)  # fmt: skip
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"collect from {tree} failed:\n{done.stderr[-2000:]}")
        return wall
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="a checkout of an older commit, run alternately")
    ap.add_argument("--math", type=int, metavar="N", help="no slow verify: N math_exact rows through `serve math_exact`")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rows = work / "rows.jsonl"
        if args.math:
            sys.path.insert(0, str(ROOT / "scripts"))
            from bench_collect import make_rows

            rows.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in make_rows("math", args.math)))
            args.rows, slow, ideal, target = args.math, 0, float("nan"), "math_exact"
        else:
            slow = write_rows(rows, args.rows)
            ideal = ((args.rows - slow) * FAST_S + slow * SLOW_S) / CONCURRENT_VERIFIES
            target = f"{ROOT / 'scripts' / 'bench_slow_tail.py'}:TailServer"
        trees = [("this tree", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
        times: dict[str, list[float]] = {name: [] for name, _ in trees}
        for round_ in range(args.rounds):
            for name, tree in trees:
                wall = run(tree, rows, work, target)
                times[name].append(wall)
                print(f"round {round_ + 1} {name}: {wall:.2f} s (load {' '.join(f'{x:.2f}' for x in os.getloadavg())})", flush=True)
        what = "math_exact, none slow" if args.math else f"{slow} slow ({SLOW_S} s; the others {FAST_S * 1000:.0f} ms); ideal {ideal:.2f} s"
        print(f"\n{args.rows:,} rows, {what}")
        print("| tree | median s | rollouts/s | x ideal |\n|---|---|---|---|")
        for name, walls in times.items():
            med = statistics.median(walls)
            print(f"| {name} | {med:.2f} | {args.rows / med:,.0f} | {med / ideal:.2f} |")
        if args.baseline:
            ratio = statistics.median(b / a for a, b in zip(times["this tree"], times["baseline"]))
            print(f"\nbaseline / this tree, run by run, median: {ratio:.2f}x")


if __name__ == "__main__":
    main()
