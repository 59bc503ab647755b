"""`gym-metrics collect` against a server that dies, drains or fails, as a user runs it.

- SIGKILL mid-verify, the server back on the same port 2 s later: collect finishes by itself
  with the metrics of an uninterrupted run (rows are padded so big batches are being written
  when the connection dies: grpc then reports INTERNAL "Internal error from Core").
- SIGTERM during the aggregate phase (drain with and without grace), restart: the same.
- A server that went away for good: exit 4 after the retries; one never reached: exit 4 after
  --connect-timeout. A handler's own INTERNAL is final: no retry, exit 2.
- Every rollout of an agent failed: exit 3, the count on stderr, the metrics file written.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import grpc
import grpc.aio
import pytest
import test_collector_faults as faults
from test_collector_faults import LISTENING, Procs, cli, collect_args, free_port, line_count, metrics_of, wait_for_lines

from gym_metrics._transport.client import is_transient

pytestmark = pytest.mark.timeout(150)

ENVS = Path(__file__).with_name("_restart_envs.py")
AGENTS = ("alpha", "beta", "gamma")
TASKS = 100
REPEATS = 8
TOTAL = len(AGENTS) * TASKS * REPEATS  # 2400 rollouts
PAD = 16_000
"""Characters of padding per row: default batches of 256 rows are ~3 MB messages."""


def serve(procs: Procs, env_class: str, port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    """`gym-metrics serve tests/collector/_restart_envs.py:<env_class> --port <port>`, once it listens."""
    offset = log.stat().st_size if log.exists() else 0
    proc = procs.start(cli("serve", f"{ENVS}:{env_class}", "--port", str(port), *extra), log, log.parent)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        match = LISTENING.search(log.read_bytes()[offset:].decode(errors="replace"))
        if match:
            assert int(match.group(2)) == port
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    raise AssertionError(f"server did not start:\n{log.read_text(errors='replace')[-3000:]}")


def write_tasks(path: Path, pad: int = PAD, failing_agent: str | None = None) -> Path:
    return faults.write_tasks(path, pad, failing_agent)


def run_collect(port: int, src: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return faults.run_collect(port, src, out, *extra, check=False)


def reference_metrics(port: int, src: Path, tmp_path: Path) -> bytes:
    """The metrics file of an uninterrupted run."""
    out = tmp_path / "reference" / "rollouts.jsonl"
    proc = run_collect(port, src, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return metrics_of(out).read_bytes()


def assert_complete(out: Path) -> None:
    keys = []
    with out.open("rb") as f:
        for line in f:
            row = json.loads(line)
            keys.append((row["agent_ref"]["name"], row["_ng_task_index"], row["_ng_rollout_index"]))
    assert len(keys) == len(set(keys)) == TOTAL, "a rollout is missing or was written twice"


@pytest.mark.slow
def test_server_sigkilled_mid_verify_and_restarted_2s_later(procs: Procs, tmp_path: Path) -> None:
    port = free_port()
    server_log = tmp_path / "server.log"
    server = serve(procs, "PacedHashEnv", port, server_log)
    src = write_tasks(tmp_path / "tasks.jsonl")
    expected = reference_metrics(port, src, tmp_path)

    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()
    log = tmp_path / "collector.log"
    # retries enough to outlast 2 s down plus a restart under load (full jitter: 8 of them once
    # waited 4.4 s in all, and the collector gave up while the server was starting)
    collector = procs.start(collect_args(port, src, out, "--max-retries", "30"), log, tmp_path)
    for fraction in (0.25, 0.6):  # twice: the retry budget starts afresh once the server answers
        wait_for_lines(collector, out, int(TOTAL * fraction))
        server.send_signal(signal.SIGKILL)
        assert server.wait(timeout=10) == -signal.SIGKILL
        time.sleep(2.0)
        assert collector.poll() is None, f"the collector gave up while the server was down:\n{log.read_text()[-3000:]}"
        assert line_count(out) < TOTAL
        server = serve(procs, "PacedHashEnv", port, server_log)

    assert collector.wait(timeout=90) == 0, log.read_text(errors="replace")[-3000:]
    assert "collect: server unavailable" in log.read_text(errors="replace")
    assert metrics_of(out).read_bytes() == expected
    assert_complete(out)


@pytest.fixture(scope="module")
def aggregate_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    """(input, metrics bytes) of an uninterrupted run of SlowAggregateEnv's metrics (without
    its wait: QuickAggregateEnv), shared by the SIGTERM tests."""
    tmp_path = tmp_path_factory.mktemp("aggregate_reference")
    procs = Procs()
    try:
        port = free_port()
        serve(procs, "QuickAggregateEnv", port, tmp_path / "server.log")
        src = write_tasks(tmp_path / "tasks.jsonl", pad=10)
        return src, reference_metrics(port, src, tmp_path)
    finally:
        procs.kill_all()


@pytest.mark.slow
@pytest.mark.parametrize("grace", ["0", "10"])
def test_server_sigtermed_during_aggregate_and_restarted(
    grace: str, procs: Procs, tmp_path: Path, aggregate_reference: tuple[Path, bytes]
) -> None:
    """A draining server refuses new calls (UNAVAILABLE) and, with no grace left, cancels the
    AggregateMetrics under way: the collector retries until the server is back."""
    port = free_port()
    server_log = tmp_path / "server.log"
    server = serve(procs, "SlowAggregateEnv", port, server_log, "--grace", grace)
    src, expected = aggregate_reference
    assert b'"solved_rate"' in expected

    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()
    log = tmp_path / "collector.log"
    collector = procs.start(collect_args(port, src, out), log, tmp_path)
    wait_for_lines(collector, out, TOTAL)  # every rollout verified: the aggregate phase is on
    time.sleep(0.3)  # the first agent's AggregateMetrics is in its compute_metrics (0.6 s)
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0
    assert not metrics_of(out).exists(), "the aggregate phase ended before the server stopped"
    time.sleep(1.0)
    assert collector.poll() is None, f"the collector gave up while the server was down:\n{log.read_text()[-3000:]}"
    serve(procs, "SlowAggregateEnv", port, server_log, "--grace", grace)

    assert collector.wait(timeout=90) == 0, log.read_text(errors="replace")[-3000:]
    assert "collect: server unavailable" in log.read_text(errors="replace")
    assert metrics_of(out).read_bytes() == expected
    assert_complete(out)


@pytest.mark.slow
def test_server_gone_for_good_exits_4_after_the_retries(procs: Procs, tmp_path: Path) -> None:
    port = free_port()
    server = serve(procs, "FastHashEnv", port, tmp_path / "server.log")
    src = write_tasks(tmp_path / "tasks.jsonl")
    out = tmp_path / "rollouts.jsonl"
    log = tmp_path / "collector.log"
    collector = procs.start(collect_args(port, src, out, "--max-retries", "2"), log, tmp_path)
    wait_for_lines(collector, out, TOTAL // 4)
    server.send_signal(signal.SIGKILL)
    assert collector.wait(timeout=60) == 4, log.read_text(errors="replace")[-3000:]
    text = log.read_text(errors="replace")
    assert "retry 2/2" in text and "gave up after 2 retries" in text and "Traceback" not in text
    assert not metrics_of(out).exists()


@pytest.mark.slow
def test_never_reachable_server_exits_4_after_the_connect_timeout(tmp_path: Path) -> None:
    port = free_port()
    src = write_tasks(tmp_path / "tasks.jsonl", pad=0)
    started = time.monotonic()
    proc = run_collect(port, src, tmp_path / "out.jsonl", "--connect-timeout", "1")
    assert proc.returncode == 4, proc.stderr
    assert f"error: cannot reach the server at 127.0.0.1:{port}: UNAVAILABLE" in proc.stderr  # refused: not waited for
    assert "retry" not in proc.stderr and "Traceback" not in proc.stderr
    assert time.monotonic() - started < 25  # not the ~30 s of the whole retry budget


@pytest.mark.slow
def test_a_handlers_internal_error_is_not_retried(procs: Procs, tmp_path: Path) -> None:
    port = free_port()
    serve(procs, "BrokenMetricsEnv", port, tmp_path / "server.log")
    src = write_tasks(tmp_path / "tasks.jsonl", pad=0)
    proc = run_collect(port, src, tmp_path / "out.jsonl")
    assert proc.returncode == 1, proc.stderr  # the environment's own code failed (exit 2 is bad input)
    assert "INTERNAL" in proc.stderr and "compute_metrics is broken" in proc.stderr
    assert "server unavailable" not in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_every_rollout_of_an_agent_failed_exits_3(procs: Procs, tmp_path: Path) -> None:
    port = free_port()
    serve(procs, "FastHashEnv", port, tmp_path / "server.log")
    src = write_tasks(tmp_path / "tasks.jsonl", pad=0, failing_agent="beta")
    out = tmp_path / "rollouts.jsonl"
    proc = run_collect(port, src, out)
    assert proc.returncode == 3, proc.stderr
    n = TASKS * REPEATS
    assert f"agent beta: {n} of {n} rollouts failed verification (verify_failed: {n}) — see _gm_error in {out}" in proc.stderr
    assert "agent alpha" not in proc.stderr and "agent gamma" not in proc.stderr
    metrics = json.loads(metrics_of(out).read_bytes())  # written all the same
    by_agent = {a["agent_ref"]["name"]: a["agent_metrics"] for a in metrics}
    assert sorted(by_agent) == list(AGENTS)
    assert by_agent["beta"]["errors/verify_failed"] == n and "errors/total" not in by_agent["alpha"]

    # Some failures are not all: exit 0.
    src = write_tasks(tmp_path / "ok" / "tasks.jsonl", pad=0)
    assert run_collect(port, src, tmp_path / "ok" / "rollouts.jsonl").returncode == 0


def _rpc_error(
    code: grpc.StatusCode, details: str, trailing: tuple[tuple[str, str | bytes], ...] = ()
) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(*trailing), details)


@pytest.mark.parametrize(
    ("code", "details", "trailing", "transient"),
    [
        (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses", (), True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", (), True),
        (grpc.StatusCode.INTERNAL, "Internal error from Core", (), True),
        (grpc.StatusCode.INTERNAL, "Received RST_STREAM with error code 2", (), True),
        (grpc.StatusCode.UNKNOWN, "Stream removed", (), True),
        (grpc.StatusCode.CANCELLED, "Cancelled", (), True),  # a server cutting calls at shutdown
        (grpc.StatusCode.INTERNAL, "verify raised RuntimeError: boom", (("grpc-status-details-bin", b"\x08\x0d"),), False),
        (grpc.StatusCode.INTERNAL, "Socket closed", (("grpc-status-details-bin", b"\x08\x0d"),), False),
        (grpc.StatusCode.INTERNAL, "some other server's own failure", (), False),
        (grpc.StatusCode.UNKNOWN, "Unexpected <class 'OSError'>: Socket closed", (), False),
        (grpc.StatusCode.CANCELLED, "Locally cancelled by application!", (), False),
        (grpc.StatusCode.INVALID_ARGUMENT, "bad row", (), False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "Stream removed", (), False),
    ],
)
def test_transient_statuses(
    code: grpc.StatusCode, details: str, trailing: tuple[tuple[str, bytes], ...], transient: bool
) -> None:
    """Retried: a broken connection or a draining server; final: what a handler answered."""
    assert is_transient(_rpc_error(code, details, trailing)) is transient
