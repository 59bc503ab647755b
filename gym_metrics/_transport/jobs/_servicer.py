"""JobService over the jobs domain's JobService: each RPC converts its request, calls it, and
converts the answer back (the job logic lives in gym_metrics.jobs, which knows no grpc)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc.aio
import orjson

from gym_metrics._transport._job_specs import PB_TO_STATE
from gym_metrics._transport.jobs._convert import record_to_job, spec_path, spec_to_dict
from gym_metrics._transport.server._errors import grpc_errors
from gym_metrics._transport.server._handlers import decode_lenient, decoded, register
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.jobs import JobRecord, JobService
from gym_metrics.v1 import jobs_pb2 as pb

SERVICE = "gym_metrics.v1.JobService"


class JobsServicer:
    """The six JobService RPCs over `jobs`."""

    def __init__(self, jobs: JobService) -> None:
        self.jobs = jobs

    def _job(self, record: JobRecord) -> pb.Job:
        job = record_to_job(record, self.jobs.hub.rate(record))
        note = self.jobs.hub.note(record)
        if note and not job.error:
            job.error = note
        return job

    @grpc_errors
    async def SubmitJob(self, request: bytes, context: grpc.aio.ServicerContext) -> pb.SubmitJobResponse:  # noqa: N802
        # Decoding, checking and storing a large inline dataset is a second of work: off the
        # event loop, from the raw bytes on (SubmitJob is registered without a deserializer).
        gone = threading.Event()  # the call ended (deadline, client gone) while the thread works
        try:
            record = await asyncio.to_thread(self._submit, request, lambda: not gone.is_set())
        except asyncio.CancelledError:
            gone.set()
            raise
        return pb.SubmitJobResponse(job=self._job(record))

    def _submit(self, raw: bytes, wanted: Callable[[], bool]) -> JobRecord:
        request = decoded(decode_lenient(pb.SubmitJobRequest, raw), "request")
        if not request.HasField("spec"):
            raise InvalidInputError("invalid job spec", [FieldViolation("spec", "required")])
        try:
            return self.jobs.submit(spec_to_dict(request.spec), wanted, request.request_id)
        except InvalidInputError as exc:  # paths from the request's top, as every RPC names them
            secrets = list(request.spec.secrets)
            raise InvalidInputError(exc.message, [_on_the_wire(v, secrets) for v in exc.violations]) from None

    @grpc_errors
    async def GetJob(self, request: Any, context: grpc.aio.ServicerContext) -> pb.GetJobResponse:  # noqa: N802
        return pb.GetJobResponse(job=self._job(await self.jobs.get(_job_id(decoded(request, "request")))))

    @grpc_errors
    async def CancelJob(self, request: Any, context: grpc.aio.ServicerContext) -> pb.CancelJobResponse:  # noqa: N802
        return pb.CancelJobResponse(job=self._job(await self.jobs.cancel(_job_id(decoded(request, "request")))))

    @grpc_errors
    async def ListJobs(self, request: Any, context: grpc.aio.ServicerContext) -> pb.ListJobsResponse:  # noqa: N802
        request = decoded(request, "request")
        if request.state != pb.JOB_STATE_UNSPECIFIED and request.state not in PB_TO_STATE:
            raise InvalidInputError("invalid request", [FieldViolation("state", f"unknown state {request.state}")])
        records, token = await self.jobs.list_jobs(PB_TO_STATE.get(request.state), request.page_size, request.page_token)
        return pb.ListJobsResponse(jobs=[self._job(r) for r in records], next_page_token=token)

    @grpc_errors
    async def WatchJob(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.WatchJobResponse]:  # noqa: N802
        async for record in self.jobs.watch(_job_id(decoded(request, "request"))):
            yield pb.WatchJobResponse(job=self._job(record))

    @grpc_errors
    async def GetJobResult(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[pb.GetJobResultResponse]:  # noqa: N802
        aggregate, parts = await self.jobs.result(_job_id(decoded(request, "request")))
        yield pb.GetJobResultResponse(aggregate_scores_json=orjson.dumps(aggregate).decode())
        async for rows in parts:
            yield pb.GetJobResultResponse(row_scores=pb.RowScores(rows_json=[orjson.dumps(r).decode() for r in rows]))


def _job_id(request: Any) -> str:
    if not request.job_id:
        raise InvalidInputError("invalid request", [FieldViolation("job_id", "required")])
    return str(request.job_id)


def add_job_service(servicer: JobsServicer, server: Any) -> None:
    """Register the six methods with lenient decoding (bad bytes -> INVALID_ARGUMENT)."""
    unary, stream = grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler
    register(server, SERVICE, servicer, {
        "SubmitJob": (unary, None, pb.SubmitJobResponse),  # raw bytes: decoded in a worker thread
        "GetJob": (unary, pb.GetJobRequest, pb.GetJobResponse),
        "ListJobs": (unary, pb.ListJobsRequest, pb.ListJobsResponse),
        "WatchJob": (stream, pb.WatchJobRequest, pb.WatchJobResponse),
        "GetJobResult": (stream, pb.GetJobResultRequest, pb.GetJobResultResponse),
        "CancelJob": (unary, pb.CancelJobRequest, pb.CancelJobResponse),
    })  # fmt: skip


__all__ = ["SERVICE", "JobsServicer", "add_job_service"]


def _on_the_wire(v: FieldViolation, secrets: list[str]) -> FieldViolation:
    """A spec violation named from SubmitJobRequest's top; a secret named by its position keeps
    its name in the description."""
    path = spec_path(v.field, secrets)
    named = v.field.startswith("secrets.") and path.startswith("spec.secrets[")
    return FieldViolation(path, f"{v.field[len('secrets.'):]}: {v.description}" if named else v.description, v.row, v.row_name)
