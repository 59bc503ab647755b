"""One bad number, URL or file on a flag is refused up front (CLI audit s37): exit 2, one error
line naming the flag and what is allowed, before any work, nothing left behind; a password in
an address is never quoted back.

A: counts that ran away (--num-repeats grew to 23 GB, --resamples, --connections, serve
--workers, dataset --size) have bounds. B: numbers past what the code can hold (an
OverflowError, islice's ValueError, protobuf's "Value out of range", float nan / inf) and a
missing extra (Ray) or a non-UTF-8 file are usage errors, not internal ones. C: a URL's user and
password given where an address is expected are masked. D: --pushgateway is checked before the
run (it failed only when pushing, after the whole collect)."""

from __future__ import annotations

import importlib.util
import json
import socket
from pathlib import Path

import pytest

from gym_metrics import cli
from gym_metrics.cli._collect_rows import repeats_entry
from gym_metrics.cli._compare import _resamples
from gym_metrics.errors import InvalidInputError
from gym_metrics.reducers import get_reducer
from gym_metrics_servers.math_exact import SAMPLE_PATH

SECRET = "s3cret"
HUGE = "99999999999999999999999999"
MAX_REPEATS, MAX_RESAMPLES = 100_000, 10_000_000  # (the bounds the docs state)
MISSING_TARGET = "no_such_environment_for_gym_metrics_tests"
"""serve's target in tests of its flags: a check that is missing fails on the target, never starts a server."""


def unused_port() -> str:
    with socket.socket() as s:  # nobody listens on it once closed: a run that got past the checks fails (exit 4)
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def refused(capsys: pytest.CaptureFixture[str], args: list[str], flag: str, *allowed: str) -> str:
    """Run the CLI; assert exit 2 and an error line naming `flag` (and each of `allowed`), no
    traceback, no internal error, no secret; the error line."""
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 2, (code, err)
    line = err.strip().splitlines()[-1]
    assert flag in line and all(a in line for a in allowed), err
    assert "Traceback" not in err and "internal error" not in err and SECRET not in err, err
    return line


def rows_file(tmp_path: Path) -> Path:
    """Two agents over four tasks, two rollouts each (what compare reads)."""
    lines = [
        {"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t + r + (agent == "a")) % 2)}
        for agent in ("a", "b") for t in range(4) for r in range(2)
    ]  # fmt: skip
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def collect_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["collect", "--server", unused_port(), "--input", str(SAMPLE_PATH), "--output", str(tmp_path / "out" / "o.jsonl"), *extra]


def assert_nothing_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


# ------------------------------------------------------------------ A: runaway resources


@pytest.mark.parametrize("value", ["1000000000", "strong_agent=1000000000", str(MAX_REPEATS + 1)])
def test_collect_num_repeats_is_bounded_before_anything_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    refused(capsys, collect_args(tmp_path, "--num-repeats", value), "--num-repeats", "at most 100,000")
    assert_nothing_written(tmp_path)
    assert repeats_entry(str(MAX_REPEATS)) == MAX_REPEATS


def test_compare_resamples_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = str(rows_file(tmp_path))
    for value in (str(MAX_RESAMPLES + 1), "1000000000", "99999999999999999999"):
        refused(capsys, ["compare", src, "--method", "bootstrap", "--resamples", value], "--resamples", "at most 10,000,000")
    assert _resamples(str(MAX_RESAMPLES)) == MAX_RESAMPLES


def test_collect_connections_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(capsys, collect_args(tmp_path, "--connections", "100000"), "--connections", "open-file limit")
    assert_nothing_written(tmp_path)


def test_serve_workers_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    refused(capsys, ["serve", MISSING_TARGET, "--workers", "100000"], "--workers", "4 per core")


def test_dataset_size_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.jsonl"
    for value in ("99999999999999999999", "1000001"):
        refused(capsys, ["dataset", "reasoning-gym", "no_such_dataset", "--size", value, "-o", str(out)], "--size", "at most 1,000,000")
    refused(capsys, ["dataset", "reasoning-gym", "no_such_dataset", "--workers", "100000", "-o", str(out)], "--workers")
    assert not out.exists()


# ------------------------------------------------------------------ B: internal errors that are usage errors


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["aggregate", "{rows}", "--expected-rollouts", HUGE], "--expected-rollouts"),
        (["evaluate", "--scorer", "tool_call_accuracy", "--input", "{rows}", "--limit-samples", HUGE], "--limit-samples"),
        (["jobs", "submit", "--server", "{port}", "--scorer", "tool_call_accuracy", "--input", "{rows}", "--limit-samples", HUGE], "--limit-samples"),
        (["jobs", "submit", "--server", "{port}", "--scorer", "tool_call_accuracy", "--input", "{rows}", "--parallelism", "99999999999"], "--parallelism"),
        (["compare", "{rows}", "--reducer", "pass@99999999999999999999"], "--reducer"),
        (["compare", "{rows}", "--reducer", "pass@100001"], "--reducer"),
        (["serve", MISSING_TARGET, "--reducers", "pass@99999999999999999999"], "--reducers"),
        (["serve", MISSING_TARGET, "--max-message-mb", "nan"], "--max-message-mb"),
        (["serve", MISSING_TARGET, "--max-message-mb", "1e400"], "--max-message-mb"),
        (["serve", MISSING_TARGET, "--max-message-mb", "1000000000000"], "--max-message-mb"),
        (["serve", MISSING_TARGET, "--grace", "nan"], "--grace"),
        (["serve", MISSING_TARGET, "--grace", "inf"], "--grace"),
    ],
)
def test_numbers_past_what_the_code_holds_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], flag: str) -> None:
    rows, port = str(rows_file(tmp_path)), unused_port()
    refused(capsys, [a.format(rows=rows, port=port) for a in args], flag)


def test_a_reducer_k_is_bounded_in_the_registry_too() -> None:
    assert get_reducer("pass@100000").k == 100_000  # type: ignore[attr-defined]
    with pytest.raises(InvalidInputError, match="k is at most 100,000"):
        get_reducer("pass@" + "9" * 5000)  # (past int()'s digit limit too)


def test_a_prompt_config_that_is_not_utf8_names_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    template = tmp_path / "prompt.yaml"
    template.write_bytes(b"user: \xff{question}\n")
    line = refused(capsys, collect_args(tmp_path, "--prompt-config", str(template)), "--prompt-config", "not UTF-8")
    assert "0xff" in line
    assert_nothing_written(tmp_path)


def test_ray_without_ray_says_what_to_install(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *more: None if name == "ray" else find(name, *more))  # Ray absent, installed or not
    refused(capsys, collect_args(tmp_path, "--ray"), "--ray", "pip install 'gym-metrics[ray]'")
    refused(capsys, ["aggregate", str(rows_file(tmp_path)), "--ray"], "--ray", "pip install 'gym-metrics[ray]'")
    assert_nothing_written(tmp_path)


# ------------------------------------------------------------------ C: passwords never quoted back


@pytest.mark.parametrize("command", ["evaluate", "collect", "jobs submit", "jobs list"])
def test_a_url_password_given_as_server_is_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    rows = str(rows_file(tmp_path))
    tail = {
        "evaluate": ["--input", rows],
        "collect": ["--input", rows, "--output", str(tmp_path / "out" / "o.jsonl")],
        "jobs submit": ["--scorer", "tool_call_accuracy", "--input", rows],
        "jobs list": [],
    }[command]
    for server in (f"http://user:{SECRET}@127.0.0.1:5", f"user:{SECRET}@127.0.0.1:5"):
        line = refused(capsys, [*command.split(), "--server", server, *tail], "--server")
        assert "***@127.0.0.1:5" in line
    assert_nothing_written(tmp_path)


@pytest.mark.parametrize("command", [["serve", "math_exact", "--port", "0"], ["view", "--port", "0"], ["jobs", "serve", "--port", "0"]])
def test_a_url_password_given_as_host_is_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]) -> None:
    db = ["--db", str(tmp_path / "jobs.db")] if command[0] == "jobs" else []
    line = refused(capsys, [*command, *db, "--host", f"http://u:{SECRET}@x"], "--host", "not a URL")
    assert "***@x" in line


def test_a_url_password_in_a_secret_host_is_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GM_TEST_SECRET", "value")
    line = refused(capsys, ["jobs", "serve", "--port", "0", "--db", str(tmp_path / "jobs.db"), "--secret-env", f"GM_TEST_SECRET=http://u:{SECRET}@h/"], "secret_env")
    assert "***@h/" in line


# ------------------------------------------------------------------ D: --pushgateway checked first


@pytest.mark.parametrize(("url", "why"), [(f"ftp://u:{SECRET}@h", "http:// or https://"), ("not a url", "not a URL"), ("http://h:99999", "not a URL")])
def test_pushgateway_url_is_checked_before_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, why: str) -> None:
    refused(capsys, collect_args(tmp_path, "--pushgateway", url), "--pushgateway", why)
    assert_nothing_written(tmp_path)
