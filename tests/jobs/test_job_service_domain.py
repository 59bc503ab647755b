"""JobService without the transport, on a real SQLite file: watching a job to its end, a result
asked for too early, pages of jobs, and a watch ended by shutdown (the RPCs over it are tested
end to end in test_service.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gym_metrics.errors import InvalidInputError, NotReadyError, UnavailableError
from gym_metrics.jobs import JobExecutor, JobService, JobState, JobStore, ProgressHub

from _jobs_helpers import tool_row


def _service(tmp_path: Path) -> tuple[JobService, ProgressHub]:
    hub = ProgressHub()
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), on_progress=hub)
    hub.bind(asyncio.get_running_loop())
    return JobService(executor, hub, part_bytes=300, poll_seconds=0.05), hub


async def test_watch_follows_a_job_to_its_end_and_the_result_comes_in_parts(tmp_path: Path) -> None:
    service, hub = _service(tmp_path)
    job = service.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(i) for i in range(12)]}})
    with pytest.raises(NotReadyError, match=f"job {job.id} is QUEUED"):
        await service.result(job.id)
    watch = service.watch(job.id)
    first = await watch.__anext__()  # the job now, read before it can run (a 12-row job can end before a later read)
    await service.executor.start()
    try:
        states = [first.state] + [record.state async for record in watch]
        aggregate, parts = await service.result(job.id)
        rows = [row async for part in parts for row in part]
    finally:
        await service.executor.aclose()
    assert states[0] in (JobState.QUEUED, JobState.RUNNING) and states[-1] is JobState.SUCCEEDED
    assert service.watching == 0
    assert [row["index"] for row in rows] == list(range(12))
    assert aggregate and hub.rate(await service.get(job.id)) > 0


async def test_pages_of_jobs_and_bad_requests(tmp_path: Path) -> None:
    service, _ = _service(tmp_path)
    ids = [service.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(0)]}}).id for _ in range(5)]
    first, token = await service.list_jobs(None, 2, "")
    second, token2 = await service.list_jobs(None, 2, token)
    third, last = await service.list_jobs(JobState.QUEUED, 2, token2)
    seen = [r.id for r in first + second + third]
    assert (len(first), len(second), len(third)) == (2, 2, 1) and sorted(seen) == sorted(ids)
    assert last == "" and token == first[-1].id and token2 == second[-1].id
    with pytest.raises(InvalidInputError, match="invalid request"):
        await service.list_jobs(None, -1, "")
    with pytest.raises(InvalidInputError) as bad_token:
        await service.list_jobs(None, 2, "no-such-job")
    assert bad_token.value.violations[0].field == "page_token"
    with pytest.raises(InvalidInputError) as unknown:
        service.submit({"scorer": "no_such_scorer", "dataset": {"rows": [{}]}})
    assert unknown.value.violations[0].field == "scorer"


async def test_shutdown_ends_a_watch_with_unavailable(tmp_path: Path) -> None:
    service, _ = _service(tmp_path)
    job = service.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": [tool_row(0)]}})  # never started: stays queued
    watch = service.watch(job.id)
    assert (await watch.__anext__()).state is JobState.QUEUED
    service.close()
    with pytest.raises(UnavailableError, match="shutting down"):
        await watch.__anext__()
    assert service.watching == 0
