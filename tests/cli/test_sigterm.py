"""SIGTERM (`timeout`, Kubernetes, kill) stops a command as Ctrl-C does: its cleanup runs, exit
143, and what it wrote is a prefix its `--resume` completes, never a short file passed off as
done. (The handler, raised inside the stream's request iterator, was swallowed by grpc: collect
retried, took its input as finished and wrote metrics of a third of the rows, exit 0.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from gym_metrics_servers.math_exact import SAMPLE_PATH, MathExactServer

from _transport_helpers import server_in_thread

pytestmark = pytest.mark.timeout(180)


def stopped_once(proc: subprocess.Popen[bytes], ready: Callable[[], bool]) -> int:
    """SIGTERM to `proc` once `ready()` (or after 60 s, bounded); its exit code (killed if it
    does not exit within 60 s)."""
    try:
        for _ in range(1200):
            if ready():
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


COPIES = 250
"""Copies of the sample (144 rows) in the stopped run's input: 36,000 rows, about 2 s of work
to be stopped in, where it is stopped once its first 100 KB (~200 rows) are written (700
copies made it 5.5 s, the clean run's as long: the proof is the same)."""


@pytest.mark.slow  # 5-10 s: on the default Python only (CI's time bound)
def test_sigterm_mid_collect_exits_143_and_resume_completes_it(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()]
    src = tmp_path / "in.jsonl"
    with src.open("w") as f:
        for k in range(COPIES):
            for row in rows:
                row = {key: value for key, value in row.items() if key != "reward"}
                f.write(json.dumps({**row, "_ng_task_index": row["_ng_task_index"] + 100 * k}) + "\n")
    out, clean = tmp_path / "out.jsonl", tmp_path / "clean.jsonl"
    with server_in_thread(MathExactServer()) as address:
        command = [sys.executable, "-m", "gym_metrics.cli", "collect", "--server", address, "--input", str(src)]
        proc = subprocess.Popen([*command, "--output", str(out)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        assert stopped_once(proc, lambda: out.exists() and out.stat().st_size > 100_000) == 128 + signal.SIGTERM  # rollouts being written
        said = proc.stderr.read()  # type: ignore[union-attr]
        assert b"Traceback" not in said and b"gym-metrics collect: stopped (SIGTERM): the rows written so far are kept; the same command with --resume" in said, said[-300:]
        written = len(out.read_bytes().splitlines())
        assert 0 < written < COPIES * len(rows), written
        assert not (tmp_path / "out_aggregate_metrics.json").exists()  # no metrics of a part passed off as the whole
        assert subprocess.run([*command, "--output", str(out), "--resume"], capture_output=True, timeout=120).returncode == 0
        assert subprocess.run([*command, "--output", str(clean)], capture_output=True, timeout=120).returncode == 0
    assert sorted(out.read_bytes().splitlines()) == sorted(clean.read_bytes().splitlines())
    assert (tmp_path / "out_aggregate_metrics.json").read_bytes() == (tmp_path / "clean_aggregate_metrics.json").read_bytes()


class _OneSlowServer(MathExactServer):
    """Task 7's first verify takes a minute; the others (and its next) answer at once, after a
    suspension."""

    slow_left = 1

    async def verify(self, body):  # type: ignore[no-untyped-def]
        import asyncio

        slow = "task seven" in str(body.responses_create_params) and self.slow_left > 0
        if slow:
            type(self).slow_left -= 1
        await asyncio.sleep(60 if slow else 0.001)
        return await super().verify(body)


def test_a_stop_while_one_verify_runs_keeps_every_rollout_verified_before_it(tmp_path: Path) -> None:
    """Batches are answered rollout by rollout: the other 299 rows of the slow one's batch (and
    of the batch behind it) are written as they finish, and --resume verifies only the slow one."""
    row = next(json.loads(line) for line in SAMPLE_PATH.read_text().splitlines())
    row.pop("reward", None)
    src = tmp_path / "in.jsonl"
    with src.open("w") as f:
        for t in range(300):
            params = {**row["responses_create_params"], "metadata": {"note": "task seven" if t == 7 else "x"}}
            f.write(json.dumps({**row, "responses_create_params": params, "_ng_task_index": t}) + "\n")
    out = tmp_path / "out.jsonl"
    with server_in_thread(_OneSlowServer()) as address:
        command = [sys.executable, "-m", "gym_metrics.cli", "collect", "--server", address, "--input", str(src), "--output", str(out)]
        proc = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
        assert stopped_once(proc, lambda: out.exists() and len(out.read_bytes().splitlines()) >= 299) == 128 + signal.SIGTERM  # the fast rows written
        written = [json.loads(line) for line in out.read_bytes().splitlines()]
        assert len(written) == 299 and 7 not in {r["_ng_task_index"] for r in written}
        resumed = subprocess.run([*command, "--resume"], capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert "1 verified" in resumed.stdout and "299 already in the output" in resumed.stdout, resumed.stdout


def test_ctrl_c_says_the_command_stopped_and_what_is_left(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Ctrl-C ended a command with exit 130 and not a word (a progress bar half drawn)."""
    from gym_metrics import cli
    from gym_metrics.cli import _collect

    def interrupted(ns: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(_collect, "run", interrupted)
    source = tmp_path / "in.jsonl"
    source.write_text('{"agent_ref": {"name": "a"}}\n')
    assert cli.main(["collect", "--server", "127.0.0.1:1", "--input", str(source), "--output", str(tmp_path / "out.jsonl")]) == 130
    said = capsys.readouterr().err.strip().splitlines()
    assert said[-1] == "gym-metrics collect: interrupted (Ctrl-C): the rows written so far are kept; the same command with --resume goes on from them"
