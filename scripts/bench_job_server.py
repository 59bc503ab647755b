"""The job server under a large inline job (issue 23): a ~47 MB job sent inline against the same
rows by path, and how long health checks wait meanwhile.

Usage: python scripts/bench_job_server.py [--rows 200000] [--runs 3] [--out FILE]

One `gym-metrics jobs serve` child process (fresh database, data root in a temporary folder).
(a) inline vs path: small tool-call rows (the job tests' `tool_row` plus a question, ~235
    bytes each: --rows 200000 is ~47 MB of JSON, the issue's case), submitted inline (`JobClient.submit` with `dataset.rows`) and by path (the same
    rows as JSONL under the data root), alternating; SubmitJob to SUCCEEDED; medians and the
    median of the pairwise ratios (goal: within 1.2x of each other).
(b) health while busy: a process sends `grpc.health.v1.Health/Check` every 10 ms throughout;
    reported are the latencies of the checks that overlapped a SubmitJob of (a), and of those
    that overlapped a ListJobs (page size 1000) called every 50 ms while one more inline job is
    submitted and runs (p50, p99, max; goal p99 < 100 ms), and ListJobs' own latency then.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "jobs"))
sys.path.insert(0, str(ROOT / "scripts"))

from _jobs_helpers import tool_row  # noqa: E402
from bench_generate import Child  # noqa: E402

from gym_metrics._transport.client import JobClient  # noqa: E402


def start_server(db: Path, data_root: Path) -> Child:
    """`gym-metrics jobs serve --port 0` in a child process; `found` is its address."""
    cmd = [sys.executable, "-m", "gym_metrics.cli", "--log-level", "warning", "jobs", "serve", "--db", str(db),
           "--port", "0", "--data-root", str(data_root)]  # fmt: skip
    return Child(cmd, r"listening on (\S+:\d+)")


PROBE = """
import sys, time, grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
stub = health_pb2_grpc.HealthStub(grpc.insecure_channel(sys.argv[1]))
every = float(sys.argv[2])
while not sys.stdin.closed:
    start = time.monotonic()
    stub.Check(health_pb2.HealthCheckRequest(), timeout=60)
    print(start, time.monotonic() - start, flush=True)
    time.sleep(every)
"""


class HealthProbe:
    """Health checks every `every` seconds from a process of its own (so neither the client's
    work nor its GIL is in the figure): (monotonic start, latency) of each."""

    def __init__(self, address: str, every: float = 0.01) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", PROBE, address, str(every)], stdout=subprocess.PIPE, text=True)
        self.samples: list[tuple[float, float]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)  # a full pipe would stop the probe
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            start, latency = line.split()
            self.samples.append((float(start), float(latency)))

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self._reader.join(60)

    def during(self, windows: list[tuple[float, float]]) -> list[float]:
        """Latencies of the checks that overlapped any window."""
        return [lat for start, lat in self.samples if any(start < b and start + lat > a for a, b in windows)]


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0}
    return {"n": len(ordered), "p50_ms": 1e3 * ordered[len(ordered) // 2],
            "p99_ms": 1e3 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], "max_ms": 1e3 * ordered[-1]}  # fmt: skip


def run_job(client: JobClient, dataset: dict[str, Any], windows: list[tuple[float, float]]) -> tuple[float, float]:
    """Seconds from SubmitJob to SUCCEEDED, and of SubmitJob alone."""
    started = time.monotonic()
    job = client.submit({"scorer": "tool_call_accuracy", "dataset": dataset})
    windows.append((started, time.monotonic()))
    *_, last = client.watch(job.job_id, timeout=1800)
    assert last.state == "SUCCEEDED", last
    return time.monotonic() - started, windows[-1][1] - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rows = [tool_row(i) | {"question": f"task {i}: what is the weather in Paris today?"} for i in range(args.rows)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "rows.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
        megabytes = (root / "rows.jsonl").stat().st_size / 1e6
        server = start_server(root / "jobs.sqlite", root)
        probe = HealthProbe(server.found)
        submits: list[tuple[float, float]] = []
        lists: list[tuple[float, float]] = []
        inline, by_path, submit_inline = [], [], []
        try:
            with JobClient(server.found, timeout=600) as client:
                for _ in range(args.runs):
                    total, submit = run_job(client, {"rows": rows}, submits)
                    inline.append(total)
                    submit_inline.append(submit)
                    by_path.append(run_job(client, {"path": "rows.jsonl"}, submits)[0])
                # ListJobs (and GetJob) while one more large job is submitted and runs
                busy = threading.Thread(target=run_job, args=(client, {"rows": rows}, []))
                busy.start()
                while busy.is_alive():
                    started = time.monotonic()
                    client.list(page_size=1000)
                    lists.append((started, time.monotonic()))
                    time.sleep(0.05)
                busy.join()
        finally:
            probe.close()
            server.stop()
    ratios = [a / b for a, b in zip(inline, by_path)]
    report = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, CPython {platform.python_version()}",
        "load": os.getloadavg(), "rows": args.rows, "megabytes": round(megabytes, 1),
        "inline_s": inline, "path_s": by_path, "inline_median_s": statistics.median(inline),
        "path_median_s": statistics.median(by_path), "inline_submit_median_s": statistics.median(submit_inline),
        "inline_over_path": statistics.median(ratios), "ratios": ratios,
        "health_during_submit": percentiles(probe.during(submits)),
        "health_during_list": percentiles(probe.during(lists)),
        "list_ms": percentiles([b - a for a, b in lists]),
    }  # fmt: skip
    text = orjson.dumps(report, option=orjson.OPT_INDENT_2).decode()
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
