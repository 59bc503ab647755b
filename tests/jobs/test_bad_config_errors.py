"""Bad input to the job server and its clients is an error naming what is wrong (exit 2 /
INVALID_ARGUMENT), never an internal error with a traceback: a dataset path the system
refuses, a template nested past the parser's stack, a `--db` that is no database, a token
read from a file with its newline."""

from __future__ import annotations

from pathlib import Path

import pytest

from gym_metrics import cli
from gym_metrics.cli._base import read_token
from gym_metrics.errors import GymMetricsError, InvalidInputError
from gym_metrics.jobs import JobExecutor, JobStore
from gym_metrics.scorers import get_scorer


@pytest.mark.parametrize(("path", "why"), [("rows\x00.jsonl", "null"), ("a/" * 3000 + "x.jsonl", "File name too long")])  # (3.13 says "null character", 3.11 "null byte")
def test_a_dataset_path_the_system_refuses_is_named(tmp_path: Path, path: str, why: str) -> None:
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), data_root=tmp_path)
    with pytest.raises(InvalidInputError, match="bad dataset path") as err:
        executor.submit({"scorer": "tool_call_accuracy", "dataset": {"path": path}})
    [violation] = err.value.violations
    assert violation.field == "dataset.path" and why in violation.description


def test_a_template_nested_past_the_parsers_stack_does_not_compile() -> None:
    body = {"a": "{{ " + "(" * 2000 + "1" + ")" * 2000 + " }}"}
    with pytest.raises(InvalidInputError, match="body.a: template does not compile: nested too deeply"):
        get_scorer("remote", {"url": "http://127.0.0.1:9/score", "body": body, "score_path": "$.score"})


def test_a_db_that_is_no_database_is_exit_2_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "notdb").write_bytes(b"this is not sqlite" * 100)
    for db, why in ((tmp_path / "dir", "a directory"), (tmp_path / "missing" / "x.db", "unable to open"), (tmp_path / "notdb", "not a database")):
        assert cli.main(["jobs", "serve", "--db", str(db), "--port", "0"]) == 2
        err = capsys.readouterr().err
        assert f"cannot use {db} as the job database (--db): " in err and why in err and "Traceback" not in err


def test_a_token_keeps_no_newline_and_refuses_what_a_header_cannot_carry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_FROM_FILE", "s3cret-token\n")
    assert read_token("TOKEN_FROM_FILE") == "s3cret-token"
    monkeypatch.setenv("TOKEN_FROM_FILE", "s3cret\ttoken")
    with pytest.raises(InvalidInputError, match="--auth-token-env TOKEN_FROM_FILE: the token holds characters a header cannot carry"):
        read_token("TOKEN_FROM_FILE")
    monkeypatch.setenv("TOKEN_FROM_FILE", "\n")
    with pytest.raises(GymMetricsError, match="not set or empty"):
        read_token("TOKEN_FROM_FILE")
