"""What durability costs: a durable job against in-process `evaluate` on the same rows, how
fast a job stops when cancelled, and how fast a killed job server has the job running again.

Usage: python scripts/bench_jobs.py [--rows 100000] [--runs 5] [--no-server] [--out FILE]

(a) overhead: `evaluate("tool_call_accuracy", read_rows(ROWS.jsonl))` and the same rows as a
    job (`JobExecutor` on a fresh SQLite file, dataset `{"path": ...}` under the data root,
    every row's result committed), from submit to SUCCEEDED. Both read and parse the same file.
    Alternating runs; medians and the median of the pairwise ratios.
(b) cancel: a `remote` job against a loopback endpoint answering in 50 ms, 16 rows in flight;
    the time from `cancel()` to the CANCELLED state (median of --runs).
(c) restart (unless --no-server): `gym-metrics jobs serve` in a child process runs the job of
    (a); it is killed with SIGKILL once a third of the rows are stored, started again on the
    same database, and the time from the new process's start to the job RUNNING with new rows
    stored is measured (one run per --runs), and that every row has exactly one result.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import sqlite3
import statistics
import subprocess
import sys
import threading
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "tests" / "jobs"))

from bench_evaluate import make_rows  # noqa: E402

from gym_metrics.evaluation import evaluate, read_rows  # noqa: E402
from gym_metrics.jobs import JobExecutor, JobState, JobStore  # noqa: E402


async def run_job(db: Path, data_root: Path, spec: dict[str, Any]) -> tuple[float, JobState]:
    executor = JobExecutor(JobStore(db), data_root=data_root)
    await executor.start()
    try:
        started = time.perf_counter()
        job = executor.submit(spec)
        record = await executor.wait(job.id, timeout=600, poll=0.02)
        return time.perf_counter() - started, record.state
    finally:
        await executor.aclose()
        executor.store.close()


def bench_overhead(data_root: Path, runs: int) -> dict[str, Any]:
    path = data_root / "rows.jsonl"
    spec = {"scorer": "tool_call_accuracy", "dataset": {"path": path.name}}
    plain: list[float] = []
    durable: list[float] = []
    for i in range(runs):
        started = time.perf_counter()
        evaluate("tool_call_accuracy", read_rows(path))
        plain.append(time.perf_counter() - started)
        db = data_root / f"jobs{i}.sqlite"
        seconds, state = asyncio.run(run_job(db, data_root, spec))
        assert state is JobState.SUCCEEDED, state
        durable.append(seconds)
    ratios = [d / p for d, p in zip(durable, plain)]
    return {"evaluate": statistics.median(plain), "job": statistics.median(durable), "ratio": statistics.median(ratios),
            "ratios": ratios}  # fmt: skip


async def cancel_once(tmp: Path, url: str) -> float:
    from _jobs_helpers import remote_config

    executor = JobExecutor(JobStore(tmp / f"cancel{time.monotonic_ns()}.sqlite"))
    await executor.start()
    try:
        spec = {"scorer": "remote", "scorer_config": remote_config(url, max_concurrency=16),
                "dataset": {"rows": [{"id": i} for i in range(2000)]}}  # fmt: skip
        job = executor.submit(spec)
        while executor.store.get(job.id).done < 32:
            await asyncio.sleep(0.01)
        started = time.perf_counter()
        executor.cancel(job.id)
        record = await executor.wait(job.id, timeout=30, poll=0.001)
        assert record.state is JobState.CANCELLED, record.state
        return time.perf_counter() - started
    finally:
        await executor.aclose()
        executor.store.close()


def bench_cancel(tmp: Path, runs: int) -> list[float]:
    from _jobs_helpers import CountingEndpoint

    with CountingEndpoint(delay=0.05) as endpoint:
        return [asyncio.run(cancel_once(tmp, endpoint.url)) for _ in range(runs)]


class JobServer:
    """`gym-metrics jobs serve --port 0` in a child process; the address is read from stderr."""

    def __init__(self, db: Path, data_root: Path) -> None:
        self.started = time.perf_counter()
        cmd = [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "jobs", "serve", "--db", str(db),
               "--port", "0", "--data-root", str(data_root)]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            found = re.search(r"listening on (\S+:\d+)", line)
            if found:
                self.address = found.group(1)
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()
                return
            if not line and self.proc.poll() is not None:
                break
        self.proc.kill()
        raise RuntimeError("job server did not start")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


def restart_once(root: Path, rows: int, i: int) -> float:
    """Seconds from starting a new server process to the killed job RUNNING with new rows."""
    from gym_metrics._transport.client import JobClient

    db = root / f"restart{i}.sqlite"
    first = JobServer(db, root)
    with JobClient(first.address) as client:
        job = client.submit({"scorer": "tool_call_accuracy", "dataset": {"path": "rows.jsonl"}})
        deadline = time.monotonic() + 300
        while client.get(job.job_id).done < rows // 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    first.kill()
    stored = _stored(db, job.job_id)
    second = JobServer(db, root)
    try:
        with JobClient(second.address) as client:
            while (info := client.get(job.job_id)).done <= stored and not info.final and time.monotonic() < deadline:
                time.sleep(0.005)
            seconds = time.perf_counter() - second.started
            for info in client.watch(job.job_id, timeout=300):
                pass
        assert info.state == "SUCCEEDED" and info.done == rows, info
        assert _stored(db, job.job_id) == rows  # one result per row (the primary key allows no more)
        return seconds
    finally:
        second.kill()


def _stored(db: Path, job_id: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM row_results WHERE job_id = ?", (job_id,)).fetchone()[0])


def server_job(root: Path, i: int) -> float:
    """Seconds from SubmitJob to SUCCEEDED seen by WatchJob, through a `jobs serve` process."""
    from gym_metrics._transport.client import JobClient

    server = JobServer(root / f"served{i}.sqlite", root)
    try:
        with JobClient(server.address) as client:
            started = time.perf_counter()
            job = client.submit({"scorer": "tool_call_accuracy", "dataset": {"path": "rows.jsonl"}})
            for info in client.watch(job.job_id, timeout=600):
                pass
            assert info.state == "SUCCEEDED", info
            return time.perf_counter() - started
    finally:
        server.kill()


def bench_restart(root: Path, rows: int, runs: int) -> list[float]:
    return [restart_once(root, rows, i) for i in range(runs)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-server", action="store_true")
    parser.add_argument("--out", type=Path, help="also write the table here")
    ns = parser.parse_args()
    lines = [
        f"{ns.rows:,} tool-call rows; {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average at start {os.getloadavg()[0]:.2f}",
        "",
        "| what | median | note |",
        "|---|---:|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "rows.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in make_rows(ns.rows)))
        o = bench_overhead(root, ns.runs)
        lines.append(f"| in-process `evaluate` (read + score) | {o['evaluate']:.2f} s | {ns.rows / o['evaluate']:,.0f} rows/s |")
        ratios = ", ".join(f"{r:.2f}" for r in o["ratios"])
        lines.append(f"| durable job, submit to SUCCEEDED | {o['job']:.2f} s | {ns.rows / o['job']:,.0f} rows/s |")
        lines.append(f"| job / evaluate (median of pairs) | {o['ratio']:.2f}x | pairs: {ratios} |")
        cancels = bench_cancel(root, ns.runs)
        lines.append(f"| cancel to CANCELLED (remote, 16 in flight) | {statistics.median(cancels) * 1000:.0f} ms | max {max(cancels) * 1000:.0f} ms |")
        if not ns.no_server:
            served = [server_job(root, i) for i in range(ns.runs)]
            lines.append(f"| durable job through `jobs serve` (gRPC), submit to SUCCEEDED | {statistics.median(served):.2f} s | "
                         f"{ns.rows / statistics.median(served):,.0f} rows/s |")  # fmt: skip
            restarts = bench_restart(root, ns.rows, ns.runs)
            lines.append(
                f"| restart (new `jobs serve` process) to the job RUNNING with new rows | {statistics.median(restarts):.2f} s | "
                f"max {max(restarts):.2f} s |"
            )
    lines.append(f"\nload average at end {os.getloadavg()[0]:.2f}")
    text = "\n".join(lines)
    print(text)
    if ns.out:
        ns.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
