"""JobExecutor's rarer paths on a real SQLite file: a job whose secret was removed before it
ran fails naming it and the jobs queued behind it still run (also when its failure waited for
disk space); a progress callback that raises never stops a job; bad limits are refused."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.jobs import JobExecutor, JobProgress, JobState, JobStore, SecretStore

from _jobs_helpers import tool_row


def secrets_file(path: Path, names: list[str]) -> Path:
    path.write_text("{" + ", ".join(f'"{n}": "sk-edge-{i}"' for i, n in enumerate(names)) + "}")
    path.chmod(0o600)
    return path


def queue_three(db: Path, names: list[str], secrets: Path) -> list[str]:
    """A job needing `names`, then two that need nothing, queued by a server that had them."""
    store = JobStore(db)
    executor = JobExecutor(store, secrets=SecretStore(secrets_file(secrets, names)))
    ids = [executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(0)]}, "secrets": names}).id]
    ids += [executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(i)]}}).id for i in (1, 2)]
    store.close()
    return ids


async def test_a_job_whose_secret_was_removed_fails_and_the_jobs_behind_it_still_run(tmp_path: Path) -> None:
    """The regression: the job failed at launch, but the dispatcher was not woken again, so the
    jobs queued behind it (beyond --max-jobs) stayed QUEUED until some other job was submitted."""
    db = tmp_path / "jobs.sqlite"
    ids = queue_three(db, ["EDGE_KEY"], tmp_path / "secrets.json")
    executor = JobExecutor(JobStore(db), max_jobs=1, secrets=SecretStore())  # restarted without EDGE_KEY
    await executor.start()
    try:
        records = [await executor.wait(job_id, timeout=30) for job_id in ids]
    finally:
        await executor.aclose()
    assert [r.state for r in records] == [JobState.FAILED, JobState.SUCCEEDED, JobState.SUCCEEDED]
    assert records[0].error == (
        "unknown secrets: secrets.EDGE_KEY: not in the job server's secret store "
        "(the operator adds secrets with --secrets-file or --secret-env)"
    )
    assert "sk-edge" not in repr(records)


async def test_a_launch_failure_found_with_the_disk_full_is_stored_once_there_is_space(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite's max_page_count gives the real SQLITE_FULL: the long error of a job naming many
    removed secrets needs new pages, so storing it waits (logged once) until space is back."""
    db = tmp_path / "jobs.sqlite"
    names = [f"EDGE_KEY_{i}_{'X' * 40}" for i in range(300)]
    ids = queue_three(db, names, tmp_path / "secrets.json")
    store = JobStore(db)
    (pages,) = store._db.execute("PRAGMA page_count").fetchone()
    store._db.execute(f"PRAGMA max_page_count = {pages}")
    caplog.set_level(logging.INFO, "gym_metrics.jobs")
    executor = JobExecutor(store, max_jobs=1, secrets=SecretStore())
    await executor.start()
    try:
        for _ in range(400):  # bounded: 20 s
            if "retrying until there is space" in caplog.text:
                break
            await asyncio.sleep(0.05)
        assert "database or disk is full" in caplog.text
        assert [store.get(job_id).state for job_id in ids] == [JobState.QUEUED] * 3
        store._db.execute("PRAGMA max_page_count = 1073741823")  # space is back
        records = [await executor.wait(job_id, timeout=30) for job_id in ids]
    finally:
        await executor.aclose()
    assert [r.state for r in records] == [JobState.FAILED, JobState.SUCCEEDED, JobState.SUCCEEDED]
    error = records[0].error or ""
    assert error.startswith(f"unknown secrets: secrets.{names[0]}: not in") and error.endswith("(+295 more)")
    assert caplog.text.count("retrying until there is space") == 1


async def test_a_progress_callback_that_raises_is_logged_and_the_job_still_succeeds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[JobProgress] = []

    def broken(progress: JobProgress) -> None:
        calls.append(progress)
        raise RuntimeError("watcher bug")

    caplog.set_level(logging.INFO, "gym_metrics.jobs")
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), on_progress=broken, flush_seconds=0)
    await executor.start()
    try:
        job = executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(i) for i in range(20)]}})
        record = await executor.wait(job.id, timeout=60)
    finally:
        await executor.aclose()
    assert record.state is JobState.SUCCEEDED and record.done == 20 and record.error is None
    assert calls and calls[-1].state is JobState.SUCCEEDED
    assert f"progress callback failed for job {job.id}" in caplog.text and "watcher bug" in caplog.text


@pytest.mark.parametrize(("max_jobs", "max_parallelism"), [(0, 8), (2, 0), (-1, -1)])
def test_limits_below_one_are_refused(tmp_path: Path, max_jobs: int, max_parallelism: int) -> None:
    with pytest.raises(InvalidInputError) as err:
        JobExecutor(JobStore(tmp_path / "jobs.sqlite"), max_jobs=max_jobs, max_parallelism=max_parallelism)
    assert str(err.value) == f"max_jobs and max_parallelism must be >= 1, got {max_jobs} and {max_parallelism}"
