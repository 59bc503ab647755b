"""`gym-metrics collect` under faults, as a user runs it: real subprocesses, real signals.

- The collector is SIGKILLed at random points (seeded) and re-run with --resume: the
  aggregate-metrics file must be byte-identical to an uninterrupted run's.
- The server is SIGKILLed mid-run and restarted on the same port: the collector must finish
  by itself, with the same bytes and no rollout written twice.
"""

from __future__ import annotations

import json
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gym_metrics.aggregate import aggregate_file

pytestmark = pytest.mark.timeout(120)

ENVS = Path(__file__).with_name("_collector_envs.py")
LISTENING = re.compile(r"listening on (\S+):(\d+)")
AGENTS = ("alpha", "beta", "gamma")
TASKS = 100
REPEATS = 8
TOTAL = len(AGENTS) * TASKS * REPEATS  # 2400 rollouts
SMALL_BATCHES = ("--batch-size", "8", "--max-in-flight", "2")


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "gym_metrics.cli", *args]


class Procs:
    """Every subprocess a test starts; whatever is still running is killed at teardown."""

    def __init__(self) -> None:
        self.running: list[subprocess.Popen[bytes]] = []

    def start(self, args: list[str], log: Path, cwd: Path, *, own_group: bool = False) -> subprocess.Popen[bytes]:
        """`own_group`: the process leads a session and process group of its own, which its children join
        (a terminal's foreground job: `os.killpg` is a Ctrl-C)."""
        with log.open("ab") as f:  # a file, not a pipe: a chatty child can never block on it
            proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, cwd=cwd, start_new_session=own_group)
        self.running.append(proc)
        return proc

    def kill_all(self) -> None:
        for proc in self.running:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def start_server(procs: Procs, env_class: str, port: int, log: Path, envs: Path = ENVS) -> tuple[subprocess.Popen[bytes], int]:
    """`gym-metrics serve tests/collector/_collector_envs.py:<env_class> --port <port>` (or another
    `envs` file); waits until it prints "listening on HOST:PORT" (15 s at most) and returns the
    bound port."""
    offset = log.stat().st_size if log.exists() else 0
    proc = procs.start(cli("serve", f"{envs}:{env_class}", "--port", str(port)), log, log.parent)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        match = LISTENING.search(log.read_bytes()[offset:].decode(errors="replace"))
        if match:
            return proc, int(match.group(2))
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    raise AssertionError(f"server did not start:\n{log.read_text(errors='replace')[-3000:]}")


def free_port() -> int:
    """A port nothing listens on now (for a server that must come back on the same port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_tasks(path: Path, pad: int = 0, failing_agent: str | None = None) -> Path:
    """One task line per (agent, task), no indices: --num-repeats expands them. `pad` bytes
    make rows big; `failing_agent`'s rows ask the environment to raise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for agent in AGENTS:
            for t in range(TASKS):
                row = {"agent_ref": {"name": agent}, "x": t * 3 + len(agent), **({"pad": "p" * pad} if pad else {})}
                if agent == failing_agent:
                    row["fail"] = True
                f.write(json.dumps(row) + "\n")
    return path


def collect_args(port: int, src: Path, out: Path, *extra: str) -> list[str]:
    return cli(
        "collect", "--server", f"127.0.0.1:{port}", "--input", str(src), "--output", str(out),
        "--num-repeats", str(REPEATS), *extra,
    )  # fmt: skip


def run_collect(port: int, src: Path, out: Path, *extra: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(collect_args(port, src, out, *extra), capture_output=True, text=True, timeout=90)
    assert not check or proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def metrics_of(out: Path) -> Path:
    return out.with_name(f"{out.stem}_aggregate_metrics.json")


def line_count(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def rollout_keys(out: Path) -> list[tuple[str, int, int]]:
    rows = [json.loads(line) for line in out.read_bytes().splitlines()]
    return [(r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows]


def assert_complete(out: Path) -> None:
    keys = rollout_keys(out)
    assert len(keys) == len(set(keys)) == TOTAL, "a rollout is missing or was written twice"


def wait_for_lines(proc: subprocess.Popen[bytes], out: Path, at_least: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while line_count(out) < at_least:
        assert proc.poll() is None, f"the collector exited ({proc.returncode}) before writing {at_least} lines"
        assert time.monotonic() < deadline, f"{out} did not reach {at_least} lines in {timeout}s"
        time.sleep(0.003)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("faults")


@pytest.fixture(scope="module")
def hash_server(workdir: Path) -> Iterator[int]:
    """One SlowHashEnv server (port 0, read back from its stderr) for the collector-kill tests."""
    procs = Procs()
    try:
        _, port = start_server(procs, "SlowHashEnv", 0, workdir / "server.log")
        yield port
    finally:
        procs.kill_all()


@pytest.fixture(scope="module")
def reference(hash_server: int, workdir: Path) -> tuple[Path, bytes]:
    """(input, metrics bytes) of an uninterrupted run."""
    src = write_tasks(workdir / "tasks.jsonl")
    out = workdir / "reference" / "rollouts.jsonl"
    run_collect(hash_server, src, out, *SMALL_BATCHES)
    assert_complete(out)
    data = json.loads(metrics_of(out).read_bytes())
    assert [a["agent_ref"]["name"] for a in data] == list(AGENTS)
    for agent in data:  # the environment fails odd rollouts of tasks with x % 37 == 5
        assert agent["agent_metrics"]["errors/total"] == agent["agent_metrics"]["errors/verify_failed"] > 0
    # ... and the numbers are those `gym-metrics aggregate` computes offline from the rollouts.
    offline, _, _ = aggregate_file(out, workdir / "offline.json")
    assert offline.read_bytes() == metrics_of(out).read_bytes()
    return src, metrics_of(out).read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_collector_then_resume_gives_identical_metrics(
    seed: int, hash_server: int, reference: tuple[Path, bytes], procs: Procs, tmp_path: Path
) -> None:
    src, expected = reference
    fraction = random.Random(seed).uniform(0.1, 0.9)
    out = tmp_path / "rollouts.jsonl"

    killed = procs.start(collect_args(hash_server, src, out, *SMALL_BATCHES), tmp_path / "killed.log", tmp_path)
    wait_for_lines(killed, out, int(TOTAL * fraction))
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=10) == -signal.SIGKILL  # killed, not finished on its own
    data = out.read_bytes()
    written = data.count(b"\n")  # whole lines; a line cut by the kill is not one
    assert 0 < written < TOTAL, f"killed at {written} lines"
    assert not metrics_of(out).exists()

    # The resumed run may batch differently: the result must not depend on it.
    proc = run_collect(hash_server, src, out, *(SMALL_BATCHES if seed != 2 else ()), "--resume")
    assert f"{TOTAL - written} verified" in proc.stdout
    assert f"{written} already in the output (resumed)" in proc.stdout
    assert ("cut a partial last line" in proc.stderr) == (not data.endswith(b"\n"))
    assert metrics_of(out).read_bytes() == expected
    assert_complete(out)


@pytest.mark.slow
def test_server_killed_and_restarted_mid_run(procs: Procs, tmp_path: Path) -> None:
    """The collector rides out a dead server: retries with backoff, resends unanswered batches
    (with their ids) on the new server, and never records a batch twice."""
    port = free_port()
    server_log = tmp_path / "server.log"
    server, bound = start_server(procs, "SlowHashMetricsEnv", port, server_log)
    assert bound == port
    src = write_tasks(tmp_path / "tasks.jsonl")

    ref_out = tmp_path / "reference" / "rollouts.jsonl"
    run_collect(port, src, ref_out, *SMALL_BATCHES)
    expected = metrics_of(ref_out).read_bytes()
    assert b'"solved_rate"' in expected  # compute_metrics ran: every row was streamed

    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()
    log = tmp_path / "collector.log"
    collector = procs.start(collect_args(port, src, out, *SMALL_BATCHES, "--max-retries", "30"), log, tmp_path)
    wait_for_lines(collector, out, TOTAL // 4)
    server.send_signal(signal.SIGKILL)
    assert server.wait(timeout=10) == -signal.SIGKILL
    at_kill = line_count(out)
    time.sleep(0.7)
    assert collector.poll() is None, "the collector gave up while the server was down"
    assert line_count(out) < TOTAL
    start_server(procs, "SlowHashMetricsEnv", port, server_log)

    assert collector.wait(timeout=60) == 0, log.read_text(errors="replace")[-3000:]
    text = log.read_text(errors="replace")
    assert "collect: server unavailable" in text and "retry 1/30" in text
    assert "batches unanswered" not in text  # no batch was lost to the dead call's reader
    assert at_kill < TOTAL
    assert metrics_of(out).read_bytes() == expected
    assert_complete(out)


def test_cli_input_errors(hash_server: int, tmp_path: Path) -> None:
    """Bad lines stop the run (exit 2, line and field named) or are skipped and reported; an
    existing output needs --resume. Never a traceback."""
    src = tmp_path / "in.jsonl"
    src.write_text(
        '{"agent_ref": {"name": "a"}, "x": 1}\n'
        '{"agent_ref": {"name": "a"}, "x": 2\n'
        '{"x": 3}\n'
        '{"agent_ref": {"name": "a"}, "x": 4, "_ng_task_index": -4}\n'
        '{"agent_ref": {"name": "a"}, "x": 5}\n'
    )
    out = tmp_path / "out.jsonl"
    args = cli("collect", "--server", f"127.0.0.1:{hash_server}", "--input", str(src), "--output", str(out))
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "line 2: json" in proc.stderr and "Traceback" not in proc.stderr
    assert not metrics_of(out).exists()

    out.unlink(missing_ok=True)
    proc = subprocess.run([*args, "--on-bad-line", "skip"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for where in ("line 2: json", "line 3: agent_ref.name", "line 4: _ng_task_index"):
        assert where in proc.stderr
    assert "3 bad lines skipped" in proc.stdout
    # a skipped line without a task index keeps the one it would have had (lines 2 and 3: tasks 1 and 2),
    # so fixed and resumed it and the lines after it keep theirs; line 4 names its own (bad) index
    assert sorted(rollout_keys(out)) == [("a", 0, 0), ("a", 3, 0)]
    assert json.loads(metrics_of(out).read_bytes())[0]["agent_ref"]["name"] == "a"

    before = out.read_bytes()
    proc = subprocess.run([*args, "--on-bad-line", "skip"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "--resume" in proc.stderr and "Traceback" not in proc.stderr
    assert out.read_bytes() == before

