"""Secrets by name: only from the operator's store (a 0600 JSON file, or environment variables
it allows), each optionally bound to hosts; the value reaches the endpoint as the bearer key
and nowhere else: not the database file, not a log line, not a record. Any other variable of
the server is out of reach, and asking for one tells nothing about whether it exists."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from urllib.parse import urlsplit

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
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), secrets=SecretStore())
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
    secrets = SecretStore(secrets_file(tmp_path, 0o600)) if source == "file" else SecretStore(allow_env={NAME: None})
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


def submit_remote(executor: JobExecutor, url: str, **over: object) -> None:
    executor.submit({"scorer": "remote", "scorer_config": remote_config(url, **over), "dataset": {"rows": [{"id": 1}]}})


@pytest.mark.parametrize("how", ["api_key_env", "secrets"])
def test_a_variable_of_the_server_is_out_of_reach_and_its_existence_is_not_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The regression: a submitter named the server's own auth token (or an AWS-style variable)
    and a URL of theirs, and the server sent it there as a bearer key."""
    monkeypatch.setenv("GYM_METRICS_AUTH_TOKEN", "server-auth-token-5c1e")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-9f2b")
    monkeypatch.delenv("NO_SUCH_VARIABLE_X", raising=False)
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), secrets=SecretStore(secrets_file(tmp_path, 0o600)))
    messages = {}
    with CountingEndpoint() as endpoint:
        for name in ("GYM_METRICS_AUTH_TOKEN", "AWS_SECRET_ACCESS_KEY", "NO_SUCH_VARIABLE_X"):
            with pytest.raises(InvalidInputError) as err:
                if how == "api_key_env":
                    submit_remote(executor, endpoint.url, api_key_env=name)
                else:
                    executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": []}, "secrets": [name]})
            messages[name] = str(err.value).replace(name, "NAME")
            assert err.value.violations[0].field == f"secrets.{name}"
    assert endpoint.requests == []
    assert len(set(messages.values())) == 1, messages  # an existing variable reads as an absent one
    assert executor.store.list_jobs() == []


def test_inside_a_job_a_key_is_never_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics._util.keys import BoundKey, keys_from, read_key

    monkeypatch.setenv("SOME_SERVER_VARIABLE", "value-of-the-server")
    assert read_key("SOME_SERVER_VARIABLE", "judge", "http://x/").value == "value-of-the-server"  # type: ignore[union-attr]
    with keys_from({"GRANTED": BoundKey("granted-value")}):
        assert read_key("GRANTED", "judge", "http://x/").value == "granted-value"  # type: ignore[union-attr]
        with pytest.raises(InvalidInputError, match="not resolved for this job"):
            read_key("SOME_SERVER_VARIABLE", "judge", "http://x/")


async def test_a_secret_bound_to_a_host_is_sent_there_and_refused_elsewhere(tmp_path: Path) -> None:
    with CountingEndpoint() as allowed, CountingEndpoint() as other:
        path = tmp_path / "secrets.json"
        hosts = [urlsplit(allowed.url).netloc]
        path.write_bytes(orjson.dumps({NAME: {"value": VALUE, "hosts": hosts}}))
        path.chmod(0o600)
        executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), secrets=SecretStore(path))
        with pytest.raises(InvalidInputError, match="may not be sent there") as err:
            submit_remote(executor, other.url, api_key_env=NAME)
        assert err.value.violations[0].field == "config.url" and VALUE not in str(err.value)
        await executor.start()
        try:
            submit_remote(executor, allowed.url, api_key_env=NAME)
            (job,) = executor.store.list_jobs()
            record = await executor.wait(job.id, timeout=60)
        finally:
            await executor.aclose()
    assert record.state is JobState.SUCCEEDED
    assert other.requests == [] and [r.header("Authorization") for r in allowed.requests] == [f"Bearer {VALUE}"]


@pytest.mark.parametrize(
    ("pattern", "url", "allowed"),
    [
        ("api.example.com", "https://api.example.com/v1", True),
        ("api.example.com", "https://API.example.com:8443/v1", True),
        ("api.example.com:443", "https://api.example.com/v1", True),
        ("api.example.com:443", "http://api.example.com/v1", False),
        ("api.example.com", "https://api.example.com.evil.test/v1", False),
        ("api.example.com", "https://api.example.com@evil.test/v1", False),
        ("*.example.com", "https://a.b.example.com/", True),
        ("*.example.com", "https://example.com/", False),
        ("*.example.com", "https://badexample.com/", False),
        ("[::1]:8080", "http://[::1]:8080/x", True),
        ("127.0.0.1", "http://127.0.0.2/", False),
        ("127.0.0.1", "http://127.0.0.1:9000/", True),  # plain http to loopback
        ("api.example.com", "http://api.example.com/v1", False),  # a bound key never goes in the clear...
        ("judge.internal:8000", "http://judge.internal:8000/v1", False),
        ("http://judge.internal:8000", "http://judge.internal:8000/v1", True),  # ...unless its binding says http://
        ("http://judge.internal:8000", "https://judge.internal:8000/v1", True),
        ("HTTP://*.svc.local", "http://judge.ns.svc.local/v1", True),
        ("http://judge.internal:8000", "http://judge.internal:8001/v1", False),
        # loopback is the loopback names and addresses, not names that start like them
        ("*.example.org", "http://localhost-judge.example.org/v1", False),
        ("*.example.org", "http://127.judge.example.org/v1", False),
        ("*.example.org", "http://localhost.example.org/v1", False),
        ("localhost:8000", "http://localhost:8000/v1", True),
        ("[::1]", "http://[::1]/v1", True),
    ],
)
def test_host_patterns(pattern: str, url: str, allowed: bool) -> None:
    from gym_metrics._util.keys import BoundKey, host_pattern

    assert BoundKey("k", frozenset({host_pattern(pattern)})).allows(url) is allowed


def test_a_key_refused_for_plain_http_says_how_to_allow_it() -> None:
    from gym_metrics._util.keys import BoundKey, host_pattern, keys_from, read_key

    with keys_from({"K": BoundKey("v", frozenset({host_pattern("judge.internal")}))}):
        with pytest.raises(InvalidInputError) as err:
            read_key("K", "judge", "http://judge.internal/v1")
    assert "over https only (bind it as http://judge.internal to allow plain http)" in str(err.value.violations[0])


@pytest.mark.parametrize("bad", ["https://api.example.com", "ftp://api.example.com", "http://a/b", "api.example.com/v1", "user@host", "a.*.com", "host:99999", ""])
def test_a_bad_host_pattern_is_refused_naming_the_entry(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "secrets.json"
    path.write_bytes(orjson.dumps({NAME: {"value": VALUE, "hosts": [bad]}}))
    path.chmod(0o600)
    with pytest.raises(InvalidInputError) as err:
        SecretStore(path)
    assert err.value.violations[0].field == f"secrets_file.{NAME}.hosts" and VALUE not in str(err.value)


def test_allowed_variables_are_read_once_and_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics.jobs import parse_allow_env

    assert parse_allow_env(["A_KEY", "B_KEY=api.example.com,*.example.org"]) == {"A_KEY": None, "B_KEY": ["api.example.com", "*.example.org"]}
    for bad in ["not-a-name", "B_KEY="]:
        with pytest.raises(InvalidInputError, match="secret-env"):
            parse_allow_env([bad])
    monkeypatch.delenv("UNSET_ALLOWED_KEY", raising=False)
    with pytest.raises(InvalidInputError, match="UNSET_ALLOWED_KEY is unset"):
        SecretStore(allow_env={"UNSET_ALLOWED_KEY": None})
    monkeypatch.setenv("SET_ALLOWED_KEY", "v1")
    store = SecretStore(allow_env={"SET_ALLOWED_KEY": ["api.example.com"]})
    monkeypatch.setenv("SET_ALLOWED_KEY", "v2")  # read once, at start
    key = store.resolve(["SET_ALLOWED_KEY"])["SET_ALLOWED_KEY"]
    assert key.value == "v1" and key.allows("https://api.example.com/x") and not key.allows("https://other.test/")
    assert "v1" not in repr(store) and "v1" not in repr(key)


@pytest.mark.parametrize("entry", [5, "", {"value": ""}, {"value": "x", "hosts": []}, {"value": "x", "extra": 1}, None])
def test_a_bad_secrets_file_entry_is_refused_without_quoting_it(tmp_path: Path, entry: object) -> None:
    path = tmp_path / "secrets.json"
    path.write_bytes(orjson.dumps({NAME: entry, "GOOD": "sk-good-value"}))
    path.chmod(0o600)
    with pytest.raises(InvalidInputError) as err:
        SecretStore(path)
    assert NAME in str(err.value) and "sk-good-value" not in str(err.value)


async def test_a_job_of_no_rows_lists_every_declared_score_also_when_its_scorer_names_a_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its scores are listed by making its scorer again, which needed the key: unset once the
    job ended, so a job with a secret listed none (evaluate lists every one, with count 0)."""
    config = {"type": "remote", "url": "http://127.0.0.1:1/score", "body": {"q": "{{item.q}}"}, "scores": [{"name": "acc"}, {"name": "f1"}]}
    monkeypatch.setenv("SCORER_KEY", "k" * 16)
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), secrets=SecretStore(allow_env={"SCORER_KEY": None}))
    monkeypatch.delenv("SCORER_KEY")  # read once at start: a job never reads the process environment
    await executor.start()
    try:
        job = executor.submit({"scorer": "remote", "scorer_config": {**config, "api_key_env": "SCORER_KEY"},
                               "dataset": {"rows": [{"q": 1}]}, "run": {"limit_samples": 0}})  # fmt: skip
        assert (await executor.wait(job.id, timeout=20)).state is JobState.SUCCEEDED
        scores = job_result(executor.store, job.id).to_dict()["aggregate_scores"]
    finally:
        await executor.aclose()
    assert [(s["name"], s["count"]) for s in scores] == [("acc", 0), ("f1", 0)]


def test_a_targets_key_bound_to_other_hosts_is_refused_at_submit_naming_the_target(tmp_path: Path) -> None:
    """It was queued, then failed naming `config.url` (a scorer's field, not the target's)."""
    store = SecretStore(allow_env={NAME: ["api.example.com"]}, environ={NAME: VALUE})
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), secrets=store)
    target = {"type": "model", "url": "https://evil.example.net/v1", "model": "m", "api_key_env": NAME}
    with pytest.raises(InvalidInputError, match="target API key may not be sent there") as err:
        executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": []}, "secrets": [NAME], "target": target})
    assert [v.field for v in err.value.violations] == ["target.url"] and VALUE not in str(err.value)
    assert executor.store.list_jobs() == []
