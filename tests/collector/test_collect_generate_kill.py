"""`gym-metrics collect --policy-*` as a user runs it: a real `serve math_exact` subprocess, a
ScriptedPolicyServer in this process, the collector SIGKILLed while it generates, then
`--resume`. The metrics must be byte-identical to an uninterrupted run's, and no rollout
written before the kill is generated again (each rollout has a prompt of its own, so the
policy's per-prompt call counts are per-rollout counts)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_collector_faults import Procs, cli, line_count, metrics_of, wait_for_lines

from gym_metrics.testing import PolicyAnswer, ScriptedPolicyServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

TASKS, REPEATS = 40, 5
TOTAL = TASKS * REPEATS
PROMPT = re.compile(r"Task (\d+), rollout (\d+): what is (\d+) \+ (\d+)\?")


def prompt(task: int, rollout: int) -> str:
    return f"Task {task}, rollout {rollout}: what is {task} + {task}?"


def answer(text: str) -> PolicyAnswer:
    """Right unless task + rollout is a multiple of 3; output tokens vary per rollout."""
    match = PROMPT.fullmatch(text)
    assert match, text
    task, rollout = int(match.group(1)), int(match.group(2))
    value = 2 * task + (1 if (task + rollout) % 3 == 0 else 0)
    return PolicyAnswer(text=f"So the answer is $\\boxed{{{value}}}$.", output_tokens=10 + task % 7 + rollout)


def write_rollouts(path: Path) -> Path:
    """One line per rollout (indices given), each with its own prompt."""
    with path.open("w") as f:
        for t in range(TASKS):
            for r in range(REPEATS):
                request = {"input": [{"role": "user", "content": prompt(t, r)}]}
                row = {"agent_ref": {"name": "policy"}, "_ng_task_index": t, "_ng_rollout_index": r, "responses_create_params": request, "expected_answer": str(2 * t)}
                f.write(json.dumps(row) + "\n")
    return path


@pytest.fixture(scope="module")
def math_port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """`gym-metrics serve math_exact --port 0`, the port read back from its log."""
    log = tmp_path_factory.mktemp("serve") / "server.log"
    procs = Procs()
    try:
        proc = procs.start(cli("serve", "math_exact", "--port", "0"), log, log.parent)
        deadline = time.monotonic() + 15
        while not (match := re.search(r"listening on \S+:(\d+)", log.read_text(errors="replace"))):
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.02)
        yield int(match.group(1))
    finally:
        procs.kill_all()


def collect_args(port: int, policy: ScriptedPolicyServer, api: str, src: Path, out: Path, *extra: str) -> list[str]:
    return cli(
        "collect", "--server", f"127.0.0.1:{port}", "--input", str(src), "--output", str(out),
        "--policy-url", policy.url, "--policy-model", "scripted", "--policy-api", api,
        "--policy-concurrency", "4", "--batch-size", "8", "--temperature", "0.7", *extra,
    )  # fmt: skip


def keys_in(out: Path) -> set[tuple[int, int]]:
    return {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, out.read_bytes().splitlines())}


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_sigkill_while_generating_then_resume(api: str, math_port: int, procs: Procs, tmp_path: Path) -> None:
    src = write_rollouts(tmp_path / "rollouts_in.jsonl")
    ref = tmp_path / "reference" / "out.jsonl"
    with ScriptedPolicyServer(answer) as policy:
        done = subprocess.run(collect_args(math_port, policy, api, src, ref), capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stdout + done.stderr
        assert sum(policy.calls.values()) == TOTAL
    assert f"{TOTAL} generated (0 generations failed)" in done.stdout
    expected = metrics_of(ref).read_bytes()
    reward = json.loads(expected)[0]["agent_metrics"]["mean/reward"]
    assert reward == pytest.approx(sum((t + r) % 3 != 0 for t in range(TASKS) for r in range(REPEATS)) / TOTAL)

    out = tmp_path / "run" / "out.jsonl"
    out.parent.mkdir()
    with ScriptedPolicyServer(answer, delay_s=0.01) as policy:  # slower, so the kill lands mid-run
        killed = procs.start(collect_args(math_port, policy, api, src, out), tmp_path / "killed.log", tmp_path)
        wait_for_lines(killed, out, TOTAL // 3)
        killed.send_signal(signal.SIGKILL)
        assert killed.wait(timeout=10) == -signal.SIGKILL
        written = line_count(out)
        assert 0 < written < TOTAL and not metrics_of(out).exists()
        data = out.read_bytes()
        finished = {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in map(json.loads, data[: data.rfind(b"\n") + 1].splitlines())}
        assert len(finished) == written

        resumed = subprocess.run(collect_args(math_port, policy, api, src, out, "--resume"), capture_output=True, text=True, timeout=90)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        for t in range(TASKS):
            for r in range(REPEATS):
                calls = policy.calls[prompt(t, r)]
                assert (calls == 1) if (t, r) in finished else (calls >= 1), (t, r, calls)
    assert f"{written} already in the output (resumed)" in resumed.stdout
    assert metrics_of(out).read_bytes() == expected
    assert keys_in(out) == {(t, r) for t in range(TASKS) for r in range(REPEATS)} and line_count(out) == TOTAL


def test_demo_online_runs_the_sample_through_a_scripted_policy(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gym_metrics.cli", "demo", "--online", "--out-dir", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = json.loads((tmp_path / "demo" / "math_exact_online_rollouts_aggregate_metrics.json").read_text())
    assert [(a["agent_ref"]["name"], a["agent_metrics"]["mean/reward"]) for a in metrics] == [("scripted_policy", 0.75)]
    assert "48 generated (0 generations failed)" in done.stdout and "attempt" not in done.stderr
