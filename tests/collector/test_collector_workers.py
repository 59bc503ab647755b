"""`serve --workers 2 --port 0` and `collect --connections 2`: verification spreads over both
worker processes (SO_REUSEPORT balances connections, so the collector opens one per worker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from test_collector_faults import LISTENING, Procs, cli

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.skipif(sys.platform == "win32", reason="fork and SO_REUSEPORT")]

ENVS = Path(__file__).with_name("_collector_envs.py")
TASKS, REPEATS = 200, 10  # 2,000 rollouts


def start_workers(procs: Procs, log: Path, workers: int = 2) -> tuple[subprocess.Popen[bytes], int]:
    """`serve ... --port 0 --workers N`; the port of its one "listening on" line."""
    proc = procs.start(cli("serve", f"{ENVS}:PidEnv", "--port", "0", "--workers", str(workers)), log, log.parent)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        match = LISTENING.search(text)
        if match:
            assert text.count("listening on") == 1, text
            assert text.count("serving on") == workers, text  # printed only once every worker is up
            return proc, int(match.group(2))
        assert proc.poll() is None, text
        time.sleep(0.05)
    raise AssertionError(f"server did not start:\n{log.read_text(errors='replace')}")


def test_two_workers_on_port_0_each_verify_a_share(tmp_path: Path) -> None:
    procs = Procs()
    try:
        server, port = start_workers(procs, tmp_path / "server.log")
        src = tmp_path / "tasks.jsonl"
        src.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, "t": t}) + "\n" for t in range(TASKS)))
        out = tmp_path / "out.jsonl"
        done = subprocess.run(
            cli(
                "collect", "--server", f"127.0.0.1:{port}", "--input", str(src), "--output", str(out),
                "--num-repeats", str(REPEATS), "--batch-size", "16",  # --connections: one per worker
            ),  # fmt: skip
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        rows = [json.loads(line) for line in out.read_bytes().splitlines()]
        keys = {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows}
        assert len(rows) == len(keys) == TASKS * REPEATS
        by_pid = Counter(r["worker_pid"] for r in rows)
        assert len(by_pid) == 2 and server.pid not in by_pid, by_pid
        assert min(by_pid.values()) >= 0.3 * len(rows), by_pid
        # SIGTERM to the parent stops both workers and it exits 0.
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        for pid in by_pid:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        procs.kill_all()


def test_one_connection_goes_to_one_worker(tmp_path: Path) -> None:
    """Why --connections exists: a single channel is a single connection, so one worker."""
    procs = Procs()
    try:
        _, port = start_workers(procs, tmp_path / "server.log")
        src = tmp_path / "tasks.jsonl"
        src.write_text("".join(json.dumps({"agent_ref": {"name": "a"}, "t": t}) + "\n" for t in range(20)))
        out = tmp_path / "out.jsonl"
        done = subprocess.run(
            cli(
                "collect", "--server", f"127.0.0.1:{port}", "--input", str(src), "--output", str(out),
                "--num-repeats", "5", "--batch-size", "4", "--connections", "1",
            ),  # fmt: skip
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        pids = {json.loads(line)["worker_pid"] for line in out.read_bytes().splitlines()}
        assert len(pids) == 1
    finally:
        procs.kill_all()
