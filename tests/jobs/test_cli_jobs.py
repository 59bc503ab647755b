"""`gym-metrics jobs ...` as a user types it, against a real `gym-metrics jobs serve`
subprocess on port 0: submit --wait, status, result; a SIGKILLed server restarted on the same
database; cancel; two jobs at once; an all-bad job; a secret that never leaves memory."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gym_metrics._transport.client import JobClient
from gym_metrics.cli import main
from gym_metrics.evaluation import evaluate
from gym_metrics.jobs import JobState, JobStore

from _jobs_helpers import CountingEndpoint, remote_config, tool_row

pytestmark = pytest.mark.slow

SECRET_NAME, SECRET_VALUE = "GYM_METRICS_TEST_CLI_JOB_KEY", "sk-cli-job-secret-71b9e4"


class JobServerProcess:
    """`gym-metrics jobs serve --port 0 ...` with its stderr in a file; `address` once up."""

    def __init__(self, db: Path, *extra: str, log: Path) -> None:
        self.db, self.extra, self.log = db, extra, log
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = self.line = ""

    def start(self) -> JobServerProcess:
        env = {k: v for k, v in os.environ.items() if k != SECRET_NAME}
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gym_metrics.cli", "jobs", "serve", "--db", str(self.db), "--port", "0", *self.extra],
                stderr=err, stdout=subprocess.DEVNULL, env=env,
            )  # fmt: skip
        for _ in range(1500):  # bounded: 30 s
            found = re.search(r"job server listening on (\S+:\d+).*", self.log.read_text())
            if found:
                self.address, self.line = found.group(1), found.group(0)
                return self
            assert self.proc.poll() is None, self.log.read_text()
            time.sleep(0.02)
        raise AssertionError("job server did not start: " + self.log.read_text())

    def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    started: list[JobServerProcess] = []

    def start(*extra: str, db: Path | None = None) -> JobServerProcess:
        server = JobServerProcess(db or tmp_path / "jobs.sqlite", *extra, log=tmp_path / f"server{len(started)}.err").start()
        started.append(server)
        return server

    yield start
    for server in started:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait(timeout=30)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "jobs", *args], capture_output=True, text=True, timeout=timeout
    )  # fmt: skip


def until(predicate: Any, seconds: float = 60) -> None:
    for _ in range(int(seconds / 0.02)):  # bounded
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not met in time")


def write_rows(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_submit_wait_status_result_equal_evaluate(tmp_path: Path, serve: Any) -> None:
    rows = [tool_row(i) for i in range(30)]
    data = write_rows(tmp_path / "rows.jsonl", rows)
    server = serve("--prometheus-port", "0")
    submitted = cli("submit", "--server", server.address, "--metric", "tool_call_accuracy", "--input", str(data), "--wait")
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", job_id) and "SUCCEEDED 30/30" in submitted.stderr
    status = cli("status", job_id, "--server", server.address)
    assert status.returncode == 0 and f"{job_id} SUCCEEDED 30/30 rows, 0 failed" in status.stdout
    listed = cli("list", "--server", server.address, "--state", "succeeded")
    assert listed.returncode == 0 and job_id in listed.stdout
    out = tmp_path / "result.json"
    assert cli("result", job_id, "--server", server.address, "-o", str(out)).returncode == 0
    expected = evaluate("tool_call_accuracy", rows)
    assert out.read_bytes() == expected.to_json()  # the very file `evaluate -o` writes
    to_stdout = cli("result", job_id, "--server", server.address)
    assert orjson.loads(to_stdout.stdout) == expected.to_dict()
    metrics_port = re.search(r"metrics on port (\d+)", server.line)
    assert metrics_port, server.line
    scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port.group(1)}/metrics", timeout=10).read().decode()
    assert 'gym_metrics_jobs{state="SUCCEEDED"} 1.0' in scraped and "gym_metrics_job_rows_done_total 30.0" in scraped
    # the same submission run again with its --request-id: answered the job it stored, no second run
    again = [cli("submit", "--server", server.address, "--metric", "tool_call_accuracy", "--input", str(data), "--request-id", "nightly-7")
             for _ in range(2)]  # fmt: skip
    assert [a.returncode for a in again] == [0, 0] and again[0].stdout == again[1].stdout != submitted.stdout
    assert len(cli("list", "--server", server.address).stdout.strip().splitlines()) == 2 + 2  # (a header and its rule)
    assert server.stop() == 0


def test_usage_errors_and_an_unreachable_server(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{oops\n')
    assert main(["jobs", "submit", "--server", "127.0.0.1:1", "--scorer", "tool_call_accuracy", "--input", str(bad)]) == 2
    assert f"{bad}" in capsys.readouterr().err
    assert main(["jobs", "status", "x", "--server", "127.0.0.1:1"]) == 4
    assert "cannot reach the job server" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if the extra were not installed
    assert main(["jobs", "serve", "--db", str(tmp_path / "j.sqlite"), "--port", "0", "--prometheus-port", "0"]) == 2
    assert "gym-metrics[prometheus]" in capsys.readouterr().err


def test_a_killed_server_resumes_the_job_on_restart(tmp_path: Path, serve: Any) -> None:
    n, parallelism = 60, 4
    data = write_rows(tmp_path / "rows.jsonl", [{"id": i} for i in range(n)])
    config = tmp_path / "remote.json"
    with CountingEndpoint(delay=0.05) as endpoint:
        config.write_text(json.dumps(remote_config(endpoint.url)))
        server = serve()
        submitted = cli("submit", "--server", server.address, "--scorer", "remote", "--scorer-config", str(config),
                        "--input", str(data), "--parallelism", str(parallelism))  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.strip()
        with JobClient(server.address) as client:
            until(lambda: client.get(job_id).done >= n // 3)
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
        store = JobStore(tmp_path / "jobs.sqlite")
        killed_at = store.get(job_id)
        store.close()
        assert killed_at.state is JobState.RUNNING and n // 3 <= killed_at.done < n  # killed mid-job
        restarted = serve()
        waited = cli("wait", job_id, "--server", restarted.address)
        assert waited.returncode == 0, waited.stderr
        result = orjson.loads(cli("result", job_id, "--server", restarted.address).stdout)
        assert restarted.stop() == 0
    assert [r["index"] for r in result["row_scores"]] == list(range(n))  # each row once
    assert [r["scores"]["score"] for r in result["row_scores"]] == [i / 10 for i in range(n)]
    assert set(endpoint.calls) == set(range(n)) and max(endpoint.calls.values()) <= 2
    assert sum(1 for c in endpoint.calls.values() if c == 2) <= parallelism


def test_a_job_resumed_after_its_dataset_file_changed_fails_saying_so(tmp_path: Path, serve: Any) -> None:
    """An --input-path job killed mid-run, its file rewritten, resumed: it scored the new file's
    rows after the old one's and ended SUCCEEDED, two datasets mixed in one result."""
    root = tmp_path / "data"
    root.mkdir()
    write_rows(root / "rows.jsonl", [{"id": i} for i in range(60)])
    config = tmp_path / "remote.json"
    with CountingEndpoint(delay=0.05) as endpoint:
        config.write_text(json.dumps(remote_config(endpoint.url)))
        server = serve("--data-root", str(root))
        job_id = cli("submit", "--server", server.address, "--scorer", "remote", "--scorer-config", str(config),
                     "--input-path", "rows.jsonl", "--parallelism", "2").stdout.strip()  # fmt: skip
        with JobClient(server.address) as client:
            until(lambda: client.get(job_id).done >= 10)
        assert server.stop(signal.SIGKILL) == -signal.SIGKILL
        write_rows(root / "rows.jsonl", [{"id": 1000 + i} for i in range(80)])  # another dataset under the same name
        restarted = serve("--data-root", str(root))
        waited = cli("wait", job_id, "--server", restarted.address)
        with JobClient(restarted.address) as client:
            info = client.get(job_id)
        restarted.stop()
    assert waited.returncode != 0 and str(info.state) == "FAILED", (waited.stdout, waited.stderr)
    assert "the dataset file rows.jsonl changed since the job started" in (info.error or "")
    assert not any(i >= 1000 for i in endpoint.calls)  # nothing of the new file was scored


def test_cancel_two_jobs_at_once_and_an_all_bad_job(tmp_path: Path, serve: Any) -> None:
    data = write_rows(tmp_path / "rows.jsonl", [{"id": i} for i in range(300)])
    few = write_rows(tmp_path / "few.jsonl", [{"id": i} for i in range(6)])
    slow, failing = tmp_path / "slow.json", tmp_path / "failing.json"
    with CountingEndpoint(delay=0.1) as endpoint, CountingEndpoint(fail=True) as broken:
        slow.write_text(json.dumps(remote_config(endpoint.url)))
        failing.write_text(json.dumps(remote_config(broken.url)))
        server = serve("--max-jobs", "2")
        common = ("--server", server.address, "--scorer", "remote", "--parallelism", "2")
        ids = [cli("submit", *common, "--scorer-config", str(slow), "--input", str(data)).stdout.strip() for _ in range(2)]
        with JobClient(server.address) as client:
            until(lambda: all(client.get(j).state == "RUNNING" and client.get(j).done >= 2 for j in ids))
            started = time.monotonic()
            cancelled = cli("cancel", ids[0], "--server", server.address)
            until(lambda: client.get(ids[0]).final, seconds=10)
            took = time.monotonic() - started
            assert cancelled.returncode == 0 and client.get(ids[0]).state == "CANCELLED"
            assert took < 5  # the goal is 1 s (this includes the CLI's start-up); generous for a loaded machine
            assert cli("wait", ids[0], "--server", server.address).returncode == 4
            assert client.get(ids[1]).state == "RUNNING"  # the other job runs on
            timed_out = cli("wait", ids[1], "--server", server.address, "--timeout", "0.5")
            assert timed_out.returncode == 4 and "did not finish within 0.5 s" in timed_out.stderr
        bad = cli("submit", *common, "--scorer-config", str(failing), "--input", str(few), "--wait")
        assert bad.returncode == 1 and "every row failed" in bad.stderr
        result = orjson.loads(cli("result", bad.stdout.strip(), "--server", server.address).stdout)
        assert len(result["row_scores"]) == 6 and all("HTTP 400" in r["error"]["reason"] for r in result["row_scores"])
        assert cli("wait", bad.stdout.strip(), "--server", server.address, "--timeout", "5").returncode == 1
        assert server.stop() == 0  # SIGTERM while ids[1] runs: it stops and stays resumable
    store = JobStore(tmp_path / "jobs.sqlite")
    left = store.get(ids[1])
    store.close()
    assert left.state is JobState.QUEUED and 0 < left.done < 300


def test_a_file_secret_stays_out_of_the_db_logs_and_output(tmp_path: Path, serve: Any) -> None:
    secrets = tmp_path / "secrets.json"
    secrets.write_bytes(orjson.dumps({SECRET_NAME: SECRET_VALUE}))
    secrets.chmod(0o600)
    data = write_rows(tmp_path / "rows.jsonl", [{"id": i} for i in range(5)])
    config = tmp_path / "remote.json"
    with CountingEndpoint() as endpoint:
        config.write_text(json.dumps(remote_config(endpoint.url, api_key_env=SECRET_NAME)))
        server = serve("--secrets-file", str(secrets), "--log-level", "debug")
        address = ("--server", server.address)
        submitted = cli("submit", *address, "--metric", "remote", "--metric-config", str(config), "--input", str(data),
                        "--secret", SECRET_NAME, "--wait")  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        job_id = submitted.stdout.strip()
        outputs = [submitted, cli("status", job_id, *address), cli("list", *address), cli("result", job_id, *address)]
        assert server.stop() == 0
    assert all(r.header("Authorization") == f"Bearer {SECRET_VALUE}" for r in endpoint.requests) and endpoint.requests
    for done in outputs:
        assert SECRET_VALUE not in done.stdout + done.stderr
    assert SECRET_VALUE not in (tmp_path / "server0.err").read_text()
    stored = list(tmp_path.glob("jobs.sqlite*"))
    assert stored and not any(SECRET_VALUE.encode() in p.read_bytes() for p in stored)


def test_sigterm_stops_a_cpu_bound_job_and_leaves_it_resumable(tmp_path: Path, serve: Any) -> None:
    """The regression: a CPU-only scorer never gave the job's loop a turn, so SIGTERM with
    --grace 10 waited for every row (25 s); the job must stop and stay resumable."""
    root = tmp_path / "data"
    root.mkdir()
    write_rows(root / "rows.jsonl", [tool_row(i) for i in range(300_000)])
    server = serve("--data-root", str(root), "--grace", "1")
    job = cli("submit", "--server", server.address, "--scorer", "tool_call_accuracy", "--input-path", "rows.jsonl").stdout.strip()
    with JobClient(server.address) as client:
        until(lambda: client.get(job).done >= 2_000)
    assert server.stop() == 0  # within stop()'s 30 s bound, not after all 300k rows
    store = JobStore(tmp_path / "jobs.sqlite")
    left = store.get(job)
    store.close()
    assert left.state is JobState.QUEUED and left.done < 300_000


def test_a_second_server_on_the_same_database_is_refused_while_the_first_lives(tmp_path: Path, serve: Any) -> None:
    """Two live servers on one --db would both resume and run its jobs (rows scored twice)."""
    first = serve()
    second = subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "jobs", "serve", "--db", str(first.db), "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 2 and "another job server runs the jobs of" in second.stderr, second.stderr
    assert "Traceback" not in second.stderr
    link = tmp_path / "link.sqlite"
    link.symlink_to(first.db)  # the same database by another path: it ran the first server's jobs twice
    through = subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "jobs", "serve", "--db", str(link), "--port", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert through.returncode == 2 and "another job server runs the jobs of" in through.stderr, through.stderr
    assert first.stop(signal.SIGKILL) != 0  # dead without cleaning up: the kernel drops its lock
    serve(db=first.db).stop()
