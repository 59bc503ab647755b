"""Sync client of JobService (`gym-metrics jobs ...` and the SDK): spec dicts in, JobInfo and
result dicts out, gRPC failures as gym-metrics errors."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
import orjson
from google.rpc import error_details_pb2, status_pb2

from gym_metrics._util.masking import remember
from gym_metrics._util.tls import trusted_roots
from gym_metrics._transport.client._resources import CHANNEL_OPTIONS
from gym_metrics._transport._job_specs import PB_TO_STATE, STATE_TO_PB, dict_to_spec, shown_spec
from gym_metrics._transport.client._status import RemoteCallError, ServerUnavailableError, ServerUnreachableError
from gym_metrics.errors import ExitCode, FieldViolation, GymMetricsError, InvalidInputError, NotFoundError
from gym_metrics.models import JobState
from gym_metrics.v1 import jobs_pb2 as pb
from gym_metrics.v1 import jobs_pb2_grpc

FINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")


class JobWaitTimeout(GymMetricsError, TimeoutError):
    """A job did not reach a final state within the wait's timeout (exit code 4)."""

    exit_code = ExitCode.UNAVAILABLE


@dataclass(frozen=True)
class JobInfo:
    """A job as the server reports it."""

    job_id: str
    state: str
    """"QUEUED" | "RUNNING" | "SUCCEEDED" | "FAILED" | "CANCELLED"."""
    done: int
    failed: int
    total: int | None
    rows_per_second: float
    error: str | None
    created: float
    updated: float
    spec: dict[str, Any]
    """The `parse_spec`-shaped spec; inline rows are left out (`dataset` is then `{}`)."""

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    @classmethod
    def from_pb(cls, job: pb.Job) -> JobInfo:
        state = PB_TO_STATE.get(job.state)
        return cls(
            job_id=job.job_id,
            state=state.value if state is not None else "UNSPECIFIED",
            done=job.rows_done,
            failed=job.rows_failed,
            total=job.rows_total if job.HasField("rows_total") else None,
            rows_per_second=job.rows_per_second,
            error=job.error or None,
            created=job.created_unix,
            updated=job.updated_unix,
            spec=shown_spec(job.spec),
        )


def _violations(exc: grpc.RpcError) -> list[FieldViolation]:
    """The google.rpc.BadRequest field violations an INVALID_ARGUMENT carries."""
    out: list[FieldViolation] = []
    metadata: Any = exc.trailing_metadata() or ()
    for key, value in metadata:
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        for detail in status_pb2.Status.FromString(value).details:
            bad = error_details_pb2.BadRequest()
            if detail.Unpack(bad):
                out.extend(FieldViolation(v.field, v.description) for v in bad.field_violations)
    return out


SUBMIT_ATTEMPTS = 3
"""Attempts of one SubmitJob whose answer did not come (UNAVAILABLE, DEADLINE_EXCEEDED)."""


class JobClient:
    """Talks to one job server: `with JobClient("host:port") as jobs: jobs.submit({...})`.

    `timeout` bounds each unary call; `watch(timeout=)` bounds a wait."""

    def __init__(
        self, target: str, *, auth_token: str | None = None, tls_ca: str | os.PathLike[str] | None = None, timeout: float = 30.0
    ) -> None:
        self.target, self.timeout = target, timeout
        if tls_ca is not None:
            credentials = grpc.ssl_channel_credentials(trusted_roots(tls_ca))
            self._channel = grpc.secure_channel(target, credentials, options=CHANNEL_OPTIONS)
        else:
            self._channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self._stub = jobs_pb2_grpc.JobServiceStub(self._channel)
        self._metadata = (("authorization", f"Bearer {auth_token}"),) if auth_token else None
        if auth_token:
            remember(auth_token)

    def __enter__(self) -> JobClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def _error(self, exc: grpc.RpcError, job_id: str | None = None) -> Exception:
        code = exc.code()
        details = exc.details() or ""
        if code is grpc.StatusCode.UNAVAILABLE:
            return ServerUnreachableError(f"cannot reach the job server at {self.target}: {details}")
        if code is grpc.StatusCode.NOT_FOUND:
            return NotFoundError(details or f"no job {job_id!r}")
        if code is grpc.StatusCode.INVALID_ARGUMENT:
            return InvalidInputError(details.split(": ", 1)[0] if _violations(exc) else details, _violations(exc))
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return ServerUnavailableError(f"the job server at {self.target} did not answer within {self.timeout:g} s")
        return RemoteCallError(code.name, details)

    def _unary(self, method: Any, request: Any, job_id: str | None = None) -> Any:
        try:
            return method(request, metadata=self._metadata, timeout=self.timeout)
        except grpc.RpcError as exc:
            raise self._error(exc, job_id) from None

    def submit(self, spec: Mapping[str, Any], request_id: str | None = None) -> JobInfo:
        """Queue a job (spec in `parse_spec`'s dict shape); InvalidInputError names bad fields.
        The request carries `request_id` (a fresh UUID4 when None), so an answer lost to a
        broken connection or a timeout is asked for again (SUBMIT_ATTEMPTS in all) without a
        second job: the server answers the job the first attempt stored."""
        request = pb.SubmitJobRequest(spec=dict_to_spec(spec), request_id=request_id or str(uuid.uuid4()))
        for attempt in range(1, SUBMIT_ATTEMPTS + 1):
            try:
                answer = self._stub.SubmitJob(request, metadata=self._metadata, timeout=self.timeout)
                return JobInfo.from_pb(answer.job)
            except grpc.RpcError as exc:
                if attempt == SUBMIT_ATTEMPTS or exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise self._error(exc) from None
            time.sleep(attempt)  # 1 s, then 2 s
        raise AssertionError("unreachable")

    def get(self, job_id: str) -> JobInfo:
        return JobInfo.from_pb(self._unary(self._stub.GetJob, pb.GetJobRequest(job_id=job_id), job_id).job)

    def cancel(self, job_id: str) -> JobInfo:
        return JobInfo.from_pb(self._unary(self._stub.CancelJob, pb.CancelJobRequest(job_id=job_id), job_id).job)

    def list(self, state: str | None = None, *, page_size: int = 100, page_token: str = "") -> tuple[list[JobInfo], str]:
        """One page of jobs, oldest first; pass the returned token for the next ("" at the end)."""
        pb_state = pb.JOB_STATE_UNSPECIFIED
        if state is not None:
            try:
                pb_state = STATE_TO_PB[JobState(state.upper())]
            except ValueError:
                raise InvalidInputError("unknown job state", [FieldViolation("state", f"{state!r}: one of {', '.join(s.value for s in JobState)}")]) from None
        request = pb.ListJobsRequest(state=pb_state, page_size=page_size, page_token=page_token)
        answer = self._unary(self._stub.ListJobs, request)
        return [JobInfo.from_pb(j) for j in answer.jobs], answer.next_page_token

    def watch(self, job_id: str, *, timeout: float | None = None) -> Iterator[JobInfo]:
        """The job now, then on every change; ends after its final state. JobWaitTimeout when
        `timeout` seconds pass first."""
        started = time.monotonic()
        call = self._stub.WatchJob(pb.WatchJobRequest(job_id=job_id), metadata=self._metadata, timeout=timeout)
        try:
            for message in call:
                info = JobInfo.from_pb(message.job)
                yield info
                if info.final:
                    return
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.DEADLINE_EXCEEDED and timeout is not None:
                raise JobWaitTimeout(f"job {job_id} did not finish within {timeout:g} s") from None
            if exc.code() is grpc.StatusCode.UNAVAILABLE and time.monotonic() - started > 0.5:
                raise ServerUnavailableError(f"lost the job server at {self.target}: {exc.details()}") from None
            raise self._error(exc, job_id) from None
        finally:
            call.cancel()
        raise ServerUnavailableError(f"the job server at {self.target} ended the watch of {job_id} before it finished")

    def result(self, job_id: str) -> dict[str, Any]:
        """`{"aggregate_scores": [...], "row_scores": [...]}` as `evaluate` writes it."""
        aggregate: list[Any] = []
        rows: list[Any] = []
        try:
            for part in self._stub.GetJobResult(pb.GetJobResultRequest(job_id=job_id), metadata=self._metadata, timeout=None):
                if part.WhichOneof("part") == "aggregate_scores_json":
                    aggregate = orjson.loads(part.aggregate_scores_json)
                else:
                    rows.extend(orjson.loads(text) for text in part.row_scores.rows_json)
        except grpc.RpcError as exc:
            if exc.code() is grpc.StatusCode.FAILED_PRECONDITION:
                raise JobNotFinishedError(exc.details() or f"job {job_id} has not finished") from None
            raise self._error(exc, job_id) from None
        return {"aggregate_scores": aggregate, "row_scores": rows}


class JobNotFinishedError(GymMetricsError):
    """`result()` of a job still QUEUED or RUNNING (FAILED_PRECONDITION on the wire): a
    usage error (exit code 2); wait for the job first."""

    exit_code = ExitCode.BAD_INPUT


__all__ = ["FINAL_STATES", "JobClient", "JobInfo", "JobNotFinishedError", "JobWaitTimeout"]
