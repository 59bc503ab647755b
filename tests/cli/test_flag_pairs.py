"""A flag that acts only with another is refused without it, before any work (exit 2, one line
naming both flags): each did nothing and said nothing (`serve --http-label-field` without
`--http-port`, `collect --push-interval` without `--pushgateway`, ...). Each case here ran (and
mostly exited 0, or served) before the flags' check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gym_metrics import cli

ROW = {"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}


def refused_in_process(capsys: pytest.CaptureFixture[str], args: list[str], *named: str) -> None:
    assert cli.main(args) == 2, args
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and all(flag in err for flag in named), err


def refused_in_a_process(args: list[str], *named: str) -> None:
    """A command that would serve (or wait) had the flags gone through: its own process, cut off."""
    try:
        proc = subprocess.run([sys.executable, "-m", "gym_metrics.cli", *args], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{args}: not refused (it ran)")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and all(flag in proc.stderr for flag in named), proc.stderr


@pytest.fixture
def rows(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    return path


@pytest.fixture
def two_agents(tmp_path: Path) -> Path:
    path = tmp_path / "ab.jsonl"
    path.write_text("".join(json.dumps({**ROW, "agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r,
                                        "reward": float((t + r + i) % 2)}) + "\n"
                            for i, agent in enumerate("ab") for t in range(6) for r in range(2)))  # fmt: skip
    return path


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--push-interval", "5"], ["--push-interval", "--pushgateway"]),
        (["--policy-api", "responses"], ["--policy-api", "--policy-url"]),
        (["--policy-concurrency", "2"], ["--policy-concurrency", "--policy-url"]),
        (["--policy-timeout", "5"], ["--policy-timeout", "--policy-url"]),
        (["--policy-max-retries", "1"], ["--policy-max-retries", "--policy-url"]),
        (["--no-agent-loop"], ["--no-agent-loop", "--policy-url"]),
    ],
)
def test_collect_refuses_a_flag_of_what_it_was_not_asked_to_do(
    flags: list[str], named: list[str], rows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["collect", "--server", "127.0.0.1:1", "--connect-timeout", "1", "--max-retries", "0", "--input", str(rows), "--output", str(tmp_path / "o.jsonl")]
    refused_in_process(capsys, [*base, *flags], *named)


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--http-label-field", "answer"], ["--http-label-field", "--http-port"]),
        (["--policy-api", "responses"], ["--policy-api", "--agent-http-port"]),
        (["--policy-timeout", "5"], ["--policy-timeout", "--agent-http-port"]),
    ],
)
def test_serve_refuses_a_door_flag_without_its_door(flags: list[str], named: list[str]) -> None:
    refused_in_a_process(["serve", "math_exact", "--port", "0", *flags], *named)


def test_serve_refuses_an_openenv_action_for_a_nemo_gym_config(tmp_path: Path) -> None:
    """A config's server is NeMo Gym's: the OpenEnv action class was never looked at."""
    refused_in_a_process(["serve", "math_exact", "--config", str(tmp_path / "c.yaml"), "--openenv-action", "m:A", "--port", "0"], "--openenv-action", "config")


def test_aggregate_refuses_an_export_of_a_partial(rows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--partial-out writes no metrics: --export exported nothing (and the extra it asked for was the first complaint)."""
    refused_in_process(capsys, ["aggregate", str(rows), "--partial-out", str(tmp_path / "p.parquet"), "--export", "tensorboard"], "--export", "--partial-out")


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--resamples", "200"], ["--resamples", "--method"]),
        (["--seed", "3"], ["--seed", "--method"]),
        (["--method", "bootstrap", "--adjust", "bh"], ["--adjust", "--method"]),
        (["--method", "bootstrap", "--power", "0.9"], ["--power", "--method"]),
        (["--common-tasks"], ["--common-tasks"]),
    ],
)
def test_compare_refuses_what_its_method_does_not_read(flags: list[str], named: list[str], two_agents: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused_in_process(capsys, ["compare", str(two_agents), "--agents", "a", "b", *flags], *named)


def test_compare_takes_each_method_its_own(two_agents: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", str(two_agents), "--agents", "a", "b", "--method", "bootstrap", "--resamples", "200", "--seed", "3"]) == 0
    assert cli.main(["compare", str(two_agents), "--agents", "a", "b", "--adjust", "bh", "--power", "0.9"]) == 0


def test_plan_refuses_a_correlation_of_two_measured_agents(two_agents: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--baseline-rollouts", str(two_agents), "--mde", "0.1"]
    refused_in_process(capsys, [*base, "--agents", "a", "b", "--correlation", "0.9"], "--correlation", "--agents")
    assert cli.main([*base, "--agents", "a", "--correlation", "0.9"]) == 0


def test_evaluate_refuses_flags_of_a_path_not_taken(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "rows.jsonl"
    src.write_text('{"user_input": [{"content": "", "type": "ai", "tool_calls": [{"name": "a", "args": {}}]}], "reference_tool_calls": [{"name": "a", "args": {}}]}\n')
    refused_in_process(capsys, ["evaluate", "--server", "127.0.0.1:1", "--input", str(src), "--parallelism", "4"], "--parallelism", "--server")
    scored = ["evaluate", "--scorer", "tool_call_accuracy", "--input", str(src), "-o", str(tmp_path / "r.json")]
    refused_in_process(capsys, [*scored, "--auth-token-env", "TOKEN"], "--auth-token-env", "--server", "--tools-server")


def test_health_refuses_an_agent_without_metrics(rows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused_in_process(capsys, ["health", str(rows), "-o", str(tmp_path / "h"), "--agent", "a"], "--agent", "--metrics")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["reasoning-gym", "--list", "-o", "rows.jsonl"], ["--list", "--output"]),
        (["reasoning-gym", "--list", "leg_counting"], ["--list", "NAME"]),
        (["nemo-gym-benchmark", "--list", "--cached"], ["--list", "--cached"]),
    ],
)
def test_dataset_list_refuses_what_it_would_drop(args: list[str], named: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    refused_in_process(capsys, ["dataset", *args], *named)
    assert not (tmp_path / "rows.jsonl").exists()
