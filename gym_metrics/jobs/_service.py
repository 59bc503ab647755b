"""The job server's calls with no transport: submit, get, cancel, list by pages, watch a job
until it ends, read a finished job's result in parts; and ProgressHub, the executor's progress
callback that keeps each job's rows/s and why a running job is not moving.

Every store read runs in a worker thread: the server's event loop stays free for health checks
and other calls while SQLite works."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from gym_metrics.errors import FieldViolation, InvalidInputError, NotFoundError, NotReadyError, OverloadedError, UnavailableError
from gym_metrics.jobs._executor import JobExecutor
from gym_metrics.jobs._result import PART_BYTES, job_result
from gym_metrics.jobs._run import JobProgress
from gym_metrics.jobs._store import JobRecord, StoreFullError
from gym_metrics.models import JobState

DEFAULT_PAGE, MAX_PAGE = 100, 1000
WATCH_POLL_SECONDS = 0.25
"""A watcher re-reads its job at least this often (progress callbacks wake it sooner)."""


REQUEST_ID = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
"""A SubmitJob request_id: what a client retrying its submission sends again (a UUID4 fits)."""


class ProgressHub:
    """The executor's `on_progress` callback (called from job threads): keeps each job's last
    rows/s (a finished job keeps its last running rate: the mean over its run) and wakes the
    watchers on the server's event loop."""

    KEEP_FINISHED = 4096
    """Finished jobs whose rate is kept (the oldest are forgotten first; see `rate`)."""

    def __init__(self) -> None:
        self.rates: dict[str, float] = {}
        self.notes: dict[str, str] = {}
        """Why a running job is not moving (e.g. paused for disk space), shown as its error."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tick = asyncio.Event()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def __call__(self, progress: JobProgress) -> None:
        if progress.state is JobState.RUNNING:
            self.rates[progress.job_id] = progress.rows_per_second
        elif progress.state.final and progress.job_id in self.rates:
            self.rates[progress.job_id] = self.rates.pop(progress.job_id)  # kept, now the newest
            while len(self.rates) > self.KEEP_FINISHED:
                del self.rates[next(iter(self.rates))]
        else:
            self.rates.pop(progress.job_id, None)
        if progress.note and progress.state is JobState.RUNNING:
            self.notes[progress.job_id] = progress.note
        else:
            self.notes.pop(progress.job_id, None)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.notify)

    def rate(self, record: JobRecord) -> float:
        """The job's rows/s: the last one reported; for a finished job not known here (the
        server restarted since), its rows over the time from submission to its end."""
        known = self.rates.get(record.id)
        if known is not None or not record.state.final or not record.done:
            return known or 0.0
        return record.done / max(record.updated - record.created, 1e-3)

    def note(self, record: JobRecord) -> str | None:
        """Why the running job is not moving, if it is not."""
        return self.notes.get(record.id) if record.state is JobState.RUNNING else None

    def notify(self) -> None:
        """Wake every waiter (on the loop)."""
        tick, self._tick = self._tick, asyncio.Event()
        tick.set()

    async def wait(self, timeout: float) -> None:
        """Until the next progress report or `timeout` seconds, whichever comes first."""
        tick = self._tick
        try:
            await asyncio.wait_for(tick.wait(), timeout)
        except asyncio.TimeoutError:
            pass


class JobService:
    """The JobService calls over a JobExecutor. `close()` ends open watches (server shutdown)."""

    def __init__(
        self, executor: JobExecutor, hub: ProgressHub, *, part_bytes: int = PART_BYTES, poll_seconds: float = WATCH_POLL_SECONDS
    ) -> None:
        self.executor, self.store, self.hub = executor, executor.store, hub
        self.part_bytes, self.poll_seconds = part_bytes, poll_seconds
        self._closing = False
        self.watching = 0
        """Open watches (each ends when its job does, its caller leaves, or at close)."""

    def close(self) -> None:
        self._closing = True
        self.hub.notify()

    def submit(self, spec: Mapping[str, Any], wanted: Callable[[], bool] | None = None, request_id: str = "") -> JobRecord:
        """Store a job (blocking: the caller runs it in a thread with the decoding); not when
        `wanted()` turns false before it is stored (its client went away). `request_id`: the job
        an earlier submission with it stored is the answer (checked: REQUEST_ID)."""
        if request_id and not REQUEST_ID.fullmatch(request_id):
            why = f"{request_id[:40]!r}{'...' if len(request_id) > 40 else ''}: at most 128 letters, digits and -_.: (a UUID4)"
            raise InvalidInputError("invalid job request", [FieldViolation("request_id", why)])
        try:
            return self.executor.submit(spec, wanted, request_id)
        except NotFoundError as exc:  # an unknown scorer: in a spec, that is a bad field
            raise InvalidInputError("invalid job spec", [FieldViolation("scorer", str(exc))]) from None
        except StoreFullError as exc:
            raise OverloadedError(f"{exc}; submit again once the server has space", retry_after_s=30.0) from None

    async def get(self, job_id: str) -> JobRecord:
        return await asyncio.to_thread(self.store.get, job_id)

    async def cancel(self, job_id: str) -> JobRecord:
        return await asyncio.to_thread(self.executor.cancel, job_id)

    async def list_jobs(self, state: JobState | None, page_size: int, page_token: str) -> tuple[list[JobRecord], str]:
        """One page of jobs (newest first) and the token of the next page ("" after the last)."""
        if page_size < 0:
            raise InvalidInputError("invalid request", [FieldViolation("page_size", "must be >= 0")])
        size = min(page_size or DEFAULT_PAGE, MAX_PAGE)
        after = page_token or None
        if after is not None:
            try:
                await asyncio.to_thread(self.store.get, after)
            except NotFoundError:
                raise InvalidInputError("invalid request", [FieldViolation("page_token", "not a token ListJobs gave")]) from None
        records = await asyncio.to_thread(self.store.list_jobs, state, limit=size + 1, after=after)
        more = len(records) > size
        records = records[:size]
        return records, records[-1].id if more and records else ""

    async def watch(self, job_id: str) -> AsyncIterator[JobRecord]:
        """The job now, then each time it changes, until it ends. A caller that goes away
        cancels this at its next await."""
        record = await asyncio.to_thread(self.store.get, job_id)
        self.watching += 1
        try:
            yield record
            last = self._changes(record)
            while not record.state.final:
                await self.hub.wait(self.poll_seconds)
                if self._closing:
                    raise UnavailableError("the job server is shutting down; watch again after it restarts")
                record = await asyncio.to_thread(self.store.get, job_id)
                if self._changes(record) != last:
                    last = self._changes(record)
                    yield record
        finally:
            self.watching -= 1

    def _changes(self, record: JobRecord) -> tuple[Any, ...]:
        return record.state, record.done, record.failed, record.total, record.error, self.hub.notes.get(record.id)

    async def result(self, job_id: str) -> tuple[Any, AsyncIterator[list[Any]]]:
        """A finished job's aggregate scores, and its rows in parts of about `part_bytes`."""
        record = await asyncio.to_thread(self.store.get, job_id)
        if not record.state.final:
            raise NotReadyError(f"job {job_id} is {record.state.value}; its result is ready once it has finished")
        aggregate = (await asyncio.to_thread(job_result, self.store, job_id)).aggregate_scores
        return aggregate, self._row_parts(job_id)

    async def _row_parts(self, job_id: str) -> AsyncIterator[list[Any]]:
        start: int | None = 0
        while start is not None:
            rows, start = await asyncio.to_thread(self.store.read_results, job_id, start=start, max_bytes=self.part_bytes)
            if rows:
                yield rows


__all__ = ["DEFAULT_PAGE", "MAX_PAGE", "PART_BYTES", "WATCH_POLL_SECONDS", "JobService", "ProgressHub"]
