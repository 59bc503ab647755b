"""Benchmark `gym-metrics collect --policy-*` (generate, then verify) on loopback; prints a
Markdown table.

Usage: python scripts/bench_generate.py [--only zero latency] [--rounds 3]
       [--zero-rollouts 20000] [--latency-rollouts 12800] [--latency-s 0.2] [--concurrency 256]

Three processes: `gym-metrics serve math_exact`, a ScriptedPolicyServer (this script with
`--serve-policy DELAY`: every prompt answered right, after DELAY seconds) and the collector
(`gym-metrics collect --policy-url ... --policy-concurrency N`) on N unverified task rows.
Per run: rollouts/s over the collector's wall time (process start-up and the final aggregation
included), the steady rate (the output's growth between 10% and 90% of its final size), and
the collector's own CPU time (user + system, from getrusage of that child alone, start-up
included) per rollout: the framework's overhead, the policy and the environment excluded; in
brackets, the same past the fixed cost of a 10-rollout run (start-up, imports, aggregation).
- `zero`: no latency, concurrency 64 (issue 13's goal: at most 200 us of collector CPU per
  rollout, i.e. 5,000 rollouts/s per client core);
- `latency`: `--latency-s` per answer at `--concurrency` (goal: within 10% of
  concurrency / latency, 1,280 rollouts/s for 256 / 0.2 s).
Each figure is printed with the load average (`uptime`'s three numbers) taken just before the
run. Every run is bounded (subprocess timeouts of RUN_TIMEOUT_S).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

RUN_TIMEOUT_S = 110
"""No single run may take longer than this (the brief: under 2 minutes)."""


def load() -> str:
    """The load average as `uptime` prints it (1, 5, 15 minutes)."""
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


class Child:
    """A child process that prints one line matching `ready` on `stream` when it is up; the
    first group of the match is kept (`found`). `with Child(...)` stops it on exit."""

    LISTENING = r"listening on (\S+:\d+)"
    """What `gym-metrics serve` (and `jobs serve`) print once bound."""

    def __init__(self, cmd: list[str], ready: str, stream: str = "stderr", timeout_s: float = 30.0, **popen: Any) -> None:
        pipes = {"stdout": subprocess.PIPE} if stream == "stdout" else {"stderr": subprocess.PIPE}
        self.proc = subprocess.Popen(cmd, text=True, **pipes, **popen)  # type: ignore[call-overload]
        pipe: IO[str] = getattr(self.proc, stream)
        deadline, seen = time.monotonic() + timeout_s, []
        while time.monotonic() < deadline:
            line = pipe.readline()
            seen.append(line)
            match = re.search(ready, line)
            if match:
                self.found = match.group(1)
                threading.Thread(target=pipe.read, daemon=True).start()  # never let the pipe fill
                return
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"{cmd} did not start:\n" + "".join(seen[-20:]))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_policy(delay_s: float) -> None:
    """The `--serve-policy` child: a scripted policy answering every prompt with 42."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from gym_metrics.testing import ScriptedPolicyServer

    with ScriptedPolicyServer(lambda _prompt: "So the answer is $\\boxed{42}$.", delay_s=delay_s) as policy:
        print(f"policy on {policy.url}", flush=True)
        while True:
            time.sleep(3600)


def write_tasks(path: Path, n: int) -> Path:
    with path.open("w") as f:
        for i in range(n):
            request = {"input": [{"role": "user", "content": f"Task {i}: what is 17 + 25?"}]}
            f.write(json.dumps({"agent_ref": {"name": "policy"}, "responses_create_params": request, "expected_answer": "42"}) + "\n")
    return path


def collect_once(server: str, policy: str, src: Path, out: Path, concurrency: int) -> tuple[float, float, float, str]:
    """(wall seconds, steady-state rollouts/s, collector CPU seconds, load before) of one run.
    The steady rate is the output's growth between 10% and 90% of its final size (sampled
    every 20 ms), so process start-up and the final aggregation are left out of it."""
    for stale in (out, out.with_name(f"{out.stem}_aggregate_metrics.json")):
        stale.unlink(missing_ok=True)
    cmd = [
        sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "collect", "--server", server,
        "--input", str(src), "--output", str(out), "--policy-url", policy, "--policy-model", "bench",
        "--policy-concurrency", str(concurrency), "--policy-timeout", "30",
    ]  # fmt: skip
    before_load = load()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    samples: list[tuple[float, int]] = []
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        while proc.poll() is None:
            if time.perf_counter() - started > RUN_TIMEOUT_S:
                proc.kill()
                raise RuntimeError("collect took too long")
            samples.append((time.perf_counter(), out.stat().st_size if out.exists() else 0))
            time.sleep(0.02)
        wall = time.perf_counter() - started
        log.seek(0)
        text = log.read()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0 or "0 generations failed" not in text:
        raise RuntimeError(f"collect failed:\n{text[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    final = out.stat().st_size
    t10 = next(t for t, size in samples if size >= 0.1 * final)
    t90 = next((t for t, size in samples if size >= 0.9 * final), samples[-1][0])
    rows = sum(1 for _ in out.open("rb"))
    steady = 0.8 * rows / max(t90 - t10, 1e-9)
    return wall, steady, cpu, before_load


def part(name: str, n: int, delay_s: float, concurrency: int, rounds: int, server: str, tmp: Path) -> None:
    policy = Child([sys.executable, __file__, "--serve-policy", str(delay_s)], r"policy on (\S+)", "stdout")
    try:
        src = write_tasks(tmp / f"{name}.jsonl", n)
        # The fixed cost (interpreter start-up, imports, connecting, aggregating): a 10-rollout run.
        fixed = collect_once(server, policy.found, write_tasks(tmp / "fixed.jsonl", 10), tmp / "fixed_out.jsonl", concurrency)[2]
        rates, steadies, cpus = [], [], []
        for r in range(rounds):
            wall, steady, cpu, before = collect_once(server, policy.found, src, tmp / f"{name}_out.jsonl", concurrency)
            rates.append(n / wall)
            steadies.append(steady)
            cpus.append(cpu / n * 1e6)
            print(
                f"| {name} run {r + 1} | {n:,} | {concurrency} | {delay_s * 1000:.0f} ms | {n / wall:,.0f} | {steady:,.0f} | "
                f"{cpu / n * 1e6:,.0f} ({(cpu - fixed) / n * 1e6:,.0f} past a fixed {fixed:.2f} s) | {before} |",
                flush=True,
            )
        goal = f" (goal {concurrency / delay_s:,.0f} within 10%)" if delay_s else " (goal: CPU <= 200 us)"
        print(
            f"| {name} median{goal} | {n:,} | {concurrency} | {delay_s * 1000:.0f} ms | {statistics.median(rates):,.0f} | "
            f"{statistics.median(steadies):,.0f} | {statistics.median(cpus):,.0f} | {load()} |",
            flush=True,
        )
    finally:
        policy.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve-policy", type=float, metavar="DELAY", help=argparse.SUPPRESS)
    ap.add_argument("--only", nargs="+", choices=["zero", "latency"], default=["zero", "latency"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--zero-rollouts", type=int, default=20_000)
    ap.add_argument("--latency-rollouts", type=int, default=12_800)
    ap.add_argument("--latency-s", type=float, default=0.2)
    ap.add_argument("--concurrency", type=int, default=256)
    ns = ap.parse_args()
    if ns.serve_policy is not None:
        serve_policy(ns.serve_policy)
        return 0
    server = Child([sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "serve", "math_exact", "--port", "0"], r"listening on (\S+:\d+)")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print("| run | rollouts | concurrency | latency | rollouts/s (wall) | rollouts/s (steady) | collector CPU us/rollout | load (1 5 15 min) |")
    print("|---|---|---|---|---|---|---|---|")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if "zero" in ns.only:
                part("zero", ns.zero_rollouts, 0.0, 64, ns.rounds, server.found, Path(tmp))
            if "latency" in ns.only:
                part("latency", ns.latency_rollouts, ns.latency_s, ns.concurrency, ns.rounds, server.found, Path(tmp))
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
