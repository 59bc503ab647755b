"""Secrets by name: from the environment or a 0600 JSON file; the value reaches the endpoint
as the bearer key and nowhere else: not the database file, not a log line, not a record."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import orjson
import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.jobs import JobExecutor, JobState, JobStore, SecretStore, job_result

from _jobs_helpers import CountingEndpoint, remote_config

VALUE = "sk-job-secret-value-8d1f3a"
NAME = "GYM_METRICS_TEST_JOB_KEY"


def secrets_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "secrets.json"
    path.write_bytes(orjson.dumps({NAME: VALUE}))
    path.chmod(mode)
    return path


def test_a_secrets_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="mode 0600") as err:
        SecretStore(secrets_file(tmp_path, 0o644))
    assert VALUE not in str(err.value)
    assert VALUE not in repr(SecretStore(secrets_file(tmp_path, 0o600)))


def test_an_unknown_secret_is_refused_at_submit(tmp_path: Path) -> None:
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), secrets=SecretStore(environ={}))
    with pytest.raises(InvalidInputError, match="unknown secrets") as err:
        executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": []}, "secrets": ["NOPE_KEY"]})
    assert err.value.violations[0].field == "secrets.NOPE_KEY"


@pytest.mark.parametrize("source", ["file", "environment"])
async def test_a_secret_reaches_the_endpoint_and_nothing_else(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    monkeypatch.setenv(NAME, VALUE if source == "environment" else "x")
    monkeypatch.delenv(NAME)  # restored to "absent" at teardown, whatever the job exported
    if source == "environment":
        monkeypatch.setenv(NAME, VALUE)
    secrets = SecretStore(secrets_file(tmp_path, 0o600)) if source == "file" else SecretStore()
    caplog.set_level(logging.DEBUG)
    db = tmp_path / "jobs.sqlite"
    with CountingEndpoint() as endpoint:
        executor = JobExecutor(JobStore(db), secrets=secrets)
        await executor.start()
        try:
            job = executor.submit({"scorer": "remote", "scorer_config": remote_config(endpoint.url, api_key_env=NAME),
                                   "dataset": {"rows": [{"id": i} for i in range(5)]}})  # fmt: skip
            record = await executor.wait(job.id, timeout=60)
        finally:
            await executor.aclose()
    assert record.state is JobState.SUCCEEDED
    assert all(r.header("Authorization") == f"Bearer {VALUE}" for r in endpoint.requests)
    returned = [repr(record), repr(job), repr(executor.store.list_jobs()), job_result(executor.store, job.id).to_json().decode()]
    assert not any(VALUE in text for text in returned)
    assert NAME in record.spec.model_dump_json()  # the name is kept, to resolve it again on resume
    executor.store.close()
    for path in tmp_path.glob("jobs.sqlite*"):  # the database, its WAL and shared memory
        assert VALUE.encode() not in path.read_bytes(), path
    assert "queued" in caplog.text and VALUE not in caplog.text
    # A file-held secret is handed to the job's clients directly, never put into os.environ.
    assert os.environ.get(NAME) == (VALUE if source == "environment" else None)
