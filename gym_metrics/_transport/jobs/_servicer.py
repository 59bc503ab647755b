"""JobService over a JobExecutor: each RPC converts, delegates to the executor or its store,
converts back (the job logic lives in gym_metrics.jobs)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
import orjson

from gym_metrics._transport.server._errors import grpc_errors
from gym_metrics._transport.server._handlers import decode_lenient, decoded, register
from gym_metrics._transport._job_specs import PB_TO_STATE
from gym_metrics._transport.jobs._convert import record_to_job, spec_to_dict
from gym_metrics.errors import FieldViolation, InvalidInputError, NotFoundError, OverloadedError
from gym_metrics.jobs import JobExecutor, JobProgress, JobRecord, JobState, StoreFullError, job_result
from gym_metrics.v1 import jobs_pb2 as pb

SERVICE = "gym_metrics.v1.JobService"
PART_BYTES = 1 << 20
"""GetJobResult's row parts hold about this much JSON each."""
DEFAULT_PAGE, MAX_PAGE = 100, 1000
WATCH_POLL_SECONDS = 0.25
"""A watcher re-reads its job at least this often (progress callbacks wake it sooner)."""


class ProgressHub:
    """The executor's `on_progress` callback (called from job threads): keeps each job's last
    rows/s (a finished job keeps its last running rate: the mean over its run) and wakes the
    WatchJob streams on the server's event loop."""

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


def _changes(record: JobRecord, hub: ProgressHub) -> tuple[Any, ...]:
    return record.state, record.done, record.failed, record.total, record.error, hub.notes.get(record.id)


class JobsServicer:
    """The six JobService RPCs. `close()` ends open WatchJob streams (server shutdown)."""

    def __init__(
        self, executor: JobExecutor, hub: ProgressHub, *, part_bytes: int = PART_BYTES, poll_seconds: float = WATCH_POLL_SECONDS
    ) -> None:
        self.executor, self.store, self.hub = executor, executor.store, hub
        self.part_bytes, self.poll_seconds = part_bytes, poll_seconds
        self._closing = False
        self.watching = 0
        """Open WatchJob streams (each ends when its job does, its client leaves, or at close)."""

    def close(self) -> None:
        self._closing = True
        self.hub.notify()

    def _job(self, record: JobRecord) -> pb.Job:
        job = record_to_job(record, self.hub.rate(record))
        note = self.hub.notes.get(record.id)
        if note and record.state is JobState.RUNNING and not job.error:
            job.error = note
        return job

    @grpc_errors
    async def SubmitJob(self, request: bytes, context: grpc.aio.ServicerContext) -> pb.Job:  # noqa: N802
        # Decoding, checking and storing a large inline dataset is a second of work: off the
        # event loop, from the raw bytes on (SubmitJob is registered without a deserializer).
        return self._job(await asyncio.to_thread(self._submit, request))

    def _submit(self, raw: bytes) -> JobRecord:
        request = decoded(decode_lenient(pb.SubmitJobRequest, raw), "request")
        if not request.HasField("spec"):
            raise InvalidInputError("invalid job spec", [FieldViolation("spec", "required")])
        try:
            return self.executor.submit(spec_to_dict(request.spec))
        except NotFoundError as exc:  # an unknown scorer: in a spec, that is a bad field
            raise InvalidInputError("invalid job spec", [FieldViolation("scorer", str(exc))]) from None
        except StoreFullError as exc:
            raise OverloadedError(f"{exc}; submit again once the server has space", retry_after_s=30.0) from None

    @grpc_errors
    async def GetJob(self, request: Any, context: grpc.aio.ServicerContext) -> pb.Job:  # noqa: N802
        return self._job(await asyncio.to_thread(self.store.get, _job_id(decoded(request, "request"))))

    @grpc_errors
    async def CancelJob(self, request: Any, context: grpc.aio.ServicerContext) -> pb.Job:  # noqa: N802
        return self._job(await asyncio.to_thread(self.executor.cancel, _job_id(decoded(request, "request"))))

    @grpc_errors
    async def ListJobs(self, request: Any, context: grpc.aio.ServicerContext) -> pb.ListJobsResponse:  # noqa: N802
        request = decoded(request, "request")
        if request.page_size < 0:
            raise InvalidInputError("invalid request", [FieldViolation("page_size", "must be >= 0")])
        if request.state != pb.JOB_STATE_UNSPECIFIED and request.state not in PB_TO_STATE:
            raise InvalidInputError("invalid request", [FieldViolation("state", f"unknown state {request.state}")])
        size = min(request.page_size or DEFAULT_PAGE, MAX_PAGE)
        after = request.page_token or None
        if after is not None:
            try:
                await asyncio.to_thread(self.store.get, after)
            except NotFoundError:
                raise InvalidInputError("invalid request", [FieldViolation("page_token", "not a token ListJobs gave")]) from None
        state = PB_TO_STATE.get(request.state)
        records = await asyncio.to_thread(self.store.list_jobs, state, limit=size + 1, after=after)
        more = len(records) > size
        records = records[:size]
        return pb.ListJobsResponse(
            jobs=[self._job(r) for r in records], next_page_token=records[-1].id if more and records else ""
        )

    @grpc_errors
    async def WatchJob(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.WatchJobResponse]:  # noqa: N802
        job_id = _job_id(decoded(request, "request"))
        record = await asyncio.to_thread(self.store.get, job_id)
        self.watching += 1
        try:  # a client that goes away cancels this generator at its next await
            yield pb.WatchJobResponse(job=self._job(record))
            last = _changes(record, self.hub)
            while not record.state.final:
                await self.hub.wait(self.poll_seconds)
                if self._closing:
                    await context.abort(grpc.StatusCode.UNAVAILABLE, "the job server is shutting down; watch again after it restarts")
                record = await asyncio.to_thread(self.store.get, job_id)
                if _changes(record, self.hub) != last:
                    last = _changes(record, self.hub)
                    yield pb.WatchJobResponse(job=self._job(record))
        finally:
            self.watching -= 1

    @grpc_errors
    async def GetJobResult(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.GetJobResultResponse]:  # noqa: N802
        job_id = _job_id(decoded(request, "request"))
        record = await asyncio.to_thread(self.store.get, job_id)
        if not record.state.final:
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION, f"job {job_id} is {record.state.value}; its result is ready once it has finished"
            )
        aggregate = (await asyncio.to_thread(job_result, self.store, job_id)).aggregate_scores
        yield pb.GetJobResultResponse(aggregate_scores_json=orjson.dumps(aggregate).decode())
        start: int | None = 0
        while start is not None:
            rows, start = await asyncio.to_thread(self.store.read_results, job_id, start=start, max_bytes=self.part_bytes)
            if rows:
                part = pb.RowScores(rows_json=[orjson.dumps(r).decode() for r in rows])
                yield pb.GetJobResultResponse(row_scores=part)


def _job_id(request: Any) -> str:
    if not request.job_id:
        raise InvalidInputError("invalid request", [FieldViolation("job_id", "required")])
    return str(request.job_id)


def add_job_service(servicer: JobsServicer, server: Any) -> None:
    """Register the six methods with lenient decoding (bad bytes -> INVALID_ARGUMENT)."""
    unary, stream = grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler
    register(server, SERVICE, servicer, {
        "SubmitJob": (unary, None, pb.Job),  # raw bytes: decoded in a worker thread
        "GetJob": (unary, pb.GetJobRequest, pb.Job),
        "ListJobs": (unary, pb.ListJobsRequest, pb.ListJobsResponse),
        "WatchJob": (stream, pb.WatchJobRequest, pb.WatchJobResponse),
        "GetJobResult": (stream, pb.GetJobResultRequest, pb.GetJobResultResponse),
        "CancelJob": (unary, pb.CancelJobRequest, pb.Job),
    })  # fmt: skip


__all__ = ["PART_BYTES", "SERVICE", "JobsServicer", "ProgressHub", "add_job_service"]
