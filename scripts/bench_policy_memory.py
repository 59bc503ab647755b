"""Peak RSS of `gym-metrics collect --policy-url` against a policy whose answers are big
(issue 23: 851 MB at concurrency 4, 1,646 MB at 16, with 64 MB answers).

Usage: python scripts/bench_policy_memory.py [--answer-mb 64] [--concurrency 4 16] [--rows-per-slot 2]
       [--out FILE]

Three processes on loopback: `gym-metrics serve math_exact`, a policy server (this script
with `--serve-policy MB`: every request answered with the same prebuilt chat completion of
about MB megabytes, ending in the right answer) and the collector, on `rows-per-slot x
concurrency` unverified task rows. Two figures of the collector alone (the servers' memory is
left out): its peak RSS while generating and verifying (VmRSS sampled every 50 ms until the
output has its last row: what concurrency and the answer budget decide), and its peak over
the whole run (`os.wait4`; the final aggregation reads the output back, so this one grows
with the output's size, whatever the concurrency). Prints a Markdown table and appends it
to --out when given. Every run is bounded (RUN_TIMEOUT_S).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_generate import Child, write_tasks  # noqa: E402  # a child read until it says it is up; policy tasks

RUN_TIMEOUT_S = 300
"""No single collect run may take longer than this."""


def serve_policy(megabytes: float) -> None:
    """The `--serve-policy` child: one prebuilt chat completion of about `megabytes` MB."""
    text = "x" * int(megabytes * 1e6) + " So the answer is $\\boxed{42}$."
    body = json.dumps(
        {
            "id": "c", "object": "chat.completion", "model": "bench",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
    ).encode()  # fmt: skip
    del text

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            view = memoryview(body)
            for start in range(0, len(body), 1 << 20):
                self.wfile.write(view[start : start + (1 << 20)])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(f"policy on http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    server.serve_forever()


def sample(pid: int, out: Path, samples: list[tuple[int, int]], done: threading.Event) -> None:
    """(VmRSS in kB, output bytes) of process `pid` every 50 ms until `done`."""
    while not done.wait(0.05):
        try:
            with open(f"/proc/{pid}/status") as status:
                rss = int(next(line.split()[1] for line in status if line.startswith("VmRSS:")))
        except (OSError, StopIteration):
            continue
        samples.append((rss, out.stat().st_size if out.exists() else 0))


def collect_once(server: str, policy: str, src: Path, out: Path, concurrency: int) -> tuple[float, float, float, str]:
    """(peak RSS in MB while generating and verifying, peak RSS in MB of the whole run, wall
    seconds, the collector's summary line) of one run."""
    cmd = [
        sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "collect", "--server", server,
        "--input", str(src), "--output", str(out), "--policy-url", policy, "--policy-model", "bench",
        "--policy-concurrency", str(concurrency), "--policy-timeout", "120",
    ]  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, text=True)
        timer = threading.Timer(RUN_TIMEOUT_S, proc.kill)
        timer.start()
        samples: list[tuple[int, int]] = []
        done = threading.Event()
        sampler = threading.Thread(target=sample, args=(proc.pid, out, samples, done), daemon=True)
        sampler.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
            done.set()
            sampler.join()
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        log.seek(0)
        text = log.read()
    if proc.returncode != 0:
        raise RuntimeError(f"collect exited {proc.returncode}:\n{text[-3000:]}")
    summary = text.strip().splitlines()[-1] if text.strip() else ""
    final = out.stat().st_size
    until_written = next((i for i, (_, size) in enumerate(samples) if size >= final), len(samples) - 1)
    generating = max((rss for rss, _ in samples[: until_written + 1]), default=0)
    return generating / 1024, usage.ru_maxrss / 1024, wall, summary.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve-policy", type=float, metavar="MB", help=argparse.SUPPRESS)
    ap.add_argument("--answer-mb", type=float, default=64.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[4, 16])
    ap.add_argument("--rows-per-slot", type=int, default=2)
    ap.add_argument("--out", type=Path)
    ns = ap.parse_args()
    if ns.serve_policy is not None:
        serve_policy(ns.serve_policy)
        return 0
    serve = [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "serve", "math_exact", "--port", "0"]
    server = Child(serve, r"listening on (\S+:\d+)")
    policy = Child([sys.executable, __file__, "--serve-policy", str(ns.answer_mb)], r"policy on (\S+)", "stdout")
    lines = [
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, answers of {ns.answer_mb:g} MB",
        "| concurrency | rows | collector peak RSS generating + verifying (MB) | whole run, aggregation included (MB) | wall (s) | collector says |",
        "|---|---|---|---|---|---|",
    ]
    print("\n".join(lines), flush=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for concurrency in ns.concurrency:
                rows = ns.rows_per_slot * concurrency
                src = write_tasks(Path(tmp) / "tasks.jsonl", rows)
                out = Path(tmp) / f"out_{concurrency}.jsonl"
                generating, whole, wall, said = collect_once(server.found, policy.found, src, out, concurrency)
                out.unlink(missing_ok=True)
                lines.append(f"| {concurrency} | {rows} | {generating:,.0f} | {whole:,.0f} | {wall:.1f} | {said[:60]} |")
                print(lines[-1], flush=True)
    finally:
        policy.stop()
        server.stop()
    if ns.out:
        with ns.out.open("a") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
