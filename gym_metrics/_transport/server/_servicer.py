"""ResourcesService over a SimpleResourcesServer: convert, delegate, convert back.

Every method goes through `grpc_errors`, so exceptions become status codes in one place.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator
from typing import Any

import grpc.aio
import numpy as np

from gym_metrics._util.cancellable import run_cancellable
from gym_metrics._util.eager import start_eagerly
from gym_metrics._transport._batches import batch_to_columns, dumps_json
from gym_metrics._transport._convert import MAX_PART_BYTES, aggregate_to_responses
from gym_metrics._transport.server._errors import UserCodeError, grpc_errors
from gym_metrics._transport.server._handlers import decoded
from gym_metrics._util.limits import CallLimits, exceeded
from gym_metrics.aggregate import AggregateOptions
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError
from gym_metrics.environments import SimpleResourcesServer
from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc

log = logging.getLogger("gym_metrics.transport")


class ResourcesServicer(resources_pb2_grpc.ResourcesServiceServicer):
    """Serves one environment.

    Args:
        env: the environment.
        max_concurrent_verifies: verifies in flight per VerifyStream call.
        verify_timeout_s: per-rollout time budget in VerifyStream (None: no limit); a rollout
            over budget is a TIMEOUT result, not a failed call.
        batch_cache_size: VerifyStream batch ids remembered per call, to answer a retried
            batch without verifying it again.
        max_inflight_batches: VerifyStream request batches verified ahead of the response
            being written (pipelining bounded so memory stays bounded).
        max_response_part_bytes: target size of each AggregateMetrics answer part.
        limits: bounds on each AggregateMetrics call (refused past them, before the work).
        metrics: a ServerMetrics recording rollouts verified / failed and the work in flight
            (`serve --prometheus-port`); None records nothing.
    """

    def __init__(
        self,
        env: SimpleResourcesServer,
        *,
        max_concurrent_verifies: int = 64,
        verify_timeout_s: float | None = None,
        batch_cache_size: int = 256,
        max_inflight_batches: int = 4,
        max_response_part_bytes: int = MAX_PART_BYTES,
        limits: CallLimits | None = None,
        worker: str = "",
        metrics: Any = None,
    ) -> None:
        self._metrics = metrics
        self._limits = limits or CallLimits()
        self._worker = worker
        """"INDEX/COUNT" of a worker process sharing the port (`serve --workers`), sent with
        GetServerInfo as `gym-metrics-worker` trailing metadata: a client opening one
        connection per worker learns where each landed."""
        self._aggregations = 0
        self._part_bytes = max_response_part_bytes
        self._env = env
        self._max_concurrent = max_concurrent_verifies
        self._timeout = verify_timeout_s
        self._cache_size = batch_cache_size
        self._max_inflight = max_inflight_batches

    # ----------------------------------------------------------------- Verify

    @grpc_errors
    async def Verify(self, request: pb.VerifyRequest, context: grpc.aio.ServicerContext) -> pb.VerifyResponse:
        if self._metrics is None:
            reward, response_json = await self._verify(decoded(request, "request").body_json)
            return pb.VerifyResponse(reward=reward, response_json=response_json)
        try:
            reward, response_json = await self._verify(decoded(request, "request").body_json)
        except Exception as exc:
            self._metrics.rollouts(0, {"invalid_request" if isinstance(exc, InvalidInputError) else "verify_failed": 1})
            raise
        self._metrics.rollouts(1)
        return pb.VerifyResponse(reward=reward, response_json=response_json)

    async def _verify(self, body_json: str, row: int | None = None) -> tuple[float, str]:
        """The env's verify; an unexpected exception from user code is labelled as such."""
        try:
            return await self._env.verify_json(body_json, row)
        except GymMetricsError:
            raise
        except Exception as exc:
            raise UserCodeError("verify", exc) from exc

    # ----------------------------------------------------------------- VerifyStream

    @grpc_errors
    async def VerifyStream(
        self, request_iterator: AsyncIterator[pb.VerifyStreamRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.VerifyStreamResponse]:
        """Batches are verified ahead (bounded) while earlier responses are written, in order."""
        slots = asyncio.Semaphore(self._max_concurrent)
        window = asyncio.Semaphore(self._max_inflight)
        cache: OrderedDict[str, asyncio.Future[pb.VerifyStreamResponse]] = OrderedDict()
        inflight: set[asyncio.Future[pb.VerifyStreamResponse]] = set()
        queue: asyncio.Queue[asyncio.Future[pb.VerifyStreamResponse] | None] = asyncio.Queue()

        async def read() -> None:
            try:
                message_no = -1
                async for request in request_iterator:
                    message_no += 1
                    _check_items(decoded(request, f"request[{message_no}]"), message_no)
                    await window.acquire()
                    future = cache.get(request.batch_id) if request.batch_id else None
                    if future is None:
                        future = asyncio.ensure_future(self._verify_batch(request, slots))
                        inflight.add(future)
                        future.add_done_callback(inflight.discard)
                        if request.batch_id:
                            cache[request.batch_id] = future
                            if len(cache) > self._cache_size:
                                cache.popitem(last=False)
                    else:
                        cache.move_to_end(request.batch_id)
                    queue.put_nowait(future)
            finally:
                queue.put_nowait(None)

        reader = asyncio.create_task(read())
        try:
            while (future := await queue.get()) is not None:
                yield await future
                window.release()
            await reader  # surfaces a failure to read the request stream
        finally:
            reader.cancel()
            for future in list(inflight):
                future.cancel()

    async def _verify_batch(self, request: pb.VerifyStreamRequest, slots: asyncio.Semaphore) -> pb.VerifyStreamResponse:
        if self._metrics is None:
            return await self._run_batch(request, slots)
        return await self._counted_batch(request, slots)

    async def _run_batch(self, request: pb.VerifyStreamRequest, slots: asyncio.Semaphore) -> pb.VerifyStreamResponse:
        """Items run eagerly: one that never suspends costs no Task; the others run concurrently.
        Each result is made in the response, in place (no copy of a finished message)."""
        response = pb.VerifyStreamResponse(batch_id=request.batch_id)
        add, trusted = response.results.add, self._env.eager_verify
        waiting: list[asyncio.Future[None]] = []
        for item in request.items:
            result = add(task_index=item.task_index, rollout_index=item.rollout_index)
            done, value = start_eagerly(self._verify_item(item, result, slots), trusted=trusted)
            if not done:
                waiting.append(value)  # type: ignore[arg-type]
        for future in waiting:
            await future
        return response

    async def _counted_batch(self, request: pb.VerifyStreamRequest, slots: asyncio.Semaphore) -> pb.VerifyStreamResponse:
        """_verify_batch, counted: the batch's rollouts are in flight until it is answered."""
        metrics = self._metrics
        queued = metrics.rollouts_in_flight.labels(metrics.environment)
        queued.inc(len(request.items))
        try:
            response = await self._run_batch(request, slots)
        finally:
            queued.dec(len(request.items))
        failed = Counter(_KIND_LABELS.get(r.error_kind, "other") for r in response.results if r.error_kind)
        metrics.rollouts(len(response.results) - sum(failed.values()), failed)
        return response

    async def _verify_item(self, item: pb.VerifyItem, result: pb.VerifyResult, slots: asyncio.Semaphore) -> None:
        """One rollout into its `result`; any failure is recorded there, never fails the call."""
        async with slots:
            try:
                call = self._verify(item.body_json)  # the result is the item's: no row number needed
                result.reward, result.response_json = await (
                    asyncio.wait_for(call, self._timeout) if self._timeout else call
                )
            except InvalidInputError as exc:
                _fail(result, pb.VERIFY_ERROR_KIND_INVALID_REQUEST, str(exc))
            except asyncio.TimeoutError:
                _fail(result, pb.VERIFY_ERROR_KIND_TIMEOUT, f"verify exceeded {self._timeout} s")
            except Exception as exc:
                log.warning("verify failed for task %d rollout %d", item.task_index, item.rollout_index, exc_info=exc)
                _fail(result, pb.VERIFY_ERROR_KIND_VERIFY_FAILED, str(exc))

    # ----------------------------------------------------------------- AggregateMetrics

    @grpc_errors
    async def AggregateMetrics(
        self, request_iterator: AsyncIterator[pb.AggregateMetricsRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.AggregateMetricsResponse]:
        """Header, then batches; the answer comes in size-bounded parts. The work runs in a
        thread that stops when the client goes away (deadline, cancel, server shutdown)."""
        messages = request_iterator.__aiter__()
        try:
            first = decoded(await messages.__anext__(), "request[0]")
        except StopAsyncIteration:
            raise InvalidInputError(
                "empty stream", [FieldViolation("header", "the stream is empty: it must start with a header")]
            ) from None
        if first.WhichOneof("payload") != "header":
            raise InvalidInputError(
                "stream must start with a header",
                [FieldViolation("request[0].header", f"first message holds {first.WhichOneof('payload') or 'nothing'}")],
            )
        limits = self._limits
        if len(first.header.expected_task_indices) > limits.max_tasks_per_call:
            raise exceeded("max_tasks_per_call", limits.max_tasks_per_call,
                           f"the header expects {len(first.header.expected_task_indices):,} tasks")  # fmt: skip
        if self._aggregations >= limits.max_concurrent_aggregations:
            raise exceeded("max_concurrent_aggregations", limits.max_concurrent_aggregations,
                           f"{self._aggregations} aggregations are running; retry later", retry_after_s=1.0)  # fmt: skip
        self._aggregations += 1
        running = self._metrics.aggregations.labels(self._metrics.environment) if self._metrics is not None else None
        if running is not None:
            running.inc()
        try:
            aggregator = self._env.new_aggregator(*_agent_and_options(first.header))
            duplicates = await self._receive(messages, aggregator, first.ByteSize())
            expected = first.header.expected_task_indices

            def finish() -> list[pb.AggregateMetricsResponse]:
                if aggregator.received_rollouts + len(expected) > limits.max_tasks_per_call:  # else it cannot be
                    tasks = aggregator.task_count(expected)
                    if tasks > limits.max_tasks_per_call:
                        raise exceeded("max_tasks_per_call", limits.max_tasks_per_call, f"the call names {tasks:,} tasks")
                result = self._env.finalize(aggregator)
                return list(aggregate_to_responses(result, aggregator.received_rollouts, duplicates, self._part_bytes))

            parts = await run_cancellable(finish, name="gym-metrics-aggregate")
        finally:
            self._aggregations -= 1
            if running is not None:
                running.dec()
        for part in parts:
            yield part

    async def _receive(self, messages: AsyncIterator[pb.AggregateMetricsRequest], aggregator: Any, size: int) -> int:
        """Add every batch to the aggregator within the call limits; returns how many batches
        were resent (ignored by batch id). Rows in errors found at the end (duplicate keys)
        are numbered across the stream: 0-based, counting every row of every batch sent."""
        limits = self._limits
        seen: set[str] = set()
        duplicates = batch_no = rows_sent = message_no = 0
        async for message in messages:
            message_no += 1
            message = decoded(message, f"request[{message_no}]")
            size += message.ByteSize()
            if size > limits.max_call_bytes:
                raise exceeded("max_call_mb", limits.max_call_mb, f"the call sent {size / (1 << 20):,.1f} MiB")
            payload = message.WhichOneof("payload")
            if payload != "batch":
                what = "a second header" if payload == "header" else "no payload"
                raise InvalidInputError(
                    "only the first message may be a header",
                    [FieldViolation(f"request[{message_no}].{payload or 'payload'}", f"got {what}; expected a batch")],
                )
            batch = message.batch
            number, offset = batch_no, rows_sent
            batch_no += 1
            rows_sent += max(len(batch.task_index), len(batch.row_json))
            if rows_sent > limits.max_rollouts_per_call:
                raise exceeded("max_rollouts_per_call", limits.max_rollouts_per_call,
                               f"the call sent {rows_sent:,} rollouts")  # fmt: skip
            if batch.batch_id:
                if batch.batch_id in seen:
                    duplicates += 1
                    continue
                seen.add(batch.batch_id)
            # Decoding columns is quick, parsing JSON rows is not: that goes off the loop.
            if len(batch.row_json):
                columns = await asyncio.to_thread(batch_to_columns, batch, number, offset)
            else:
                columns = batch_to_columns(batch, number, offset)
            aggregator.add(columns)
        return duplicates

    # ----------------------------------------------------------------- GetServerInfo

    @grpc_errors
    async def GetServerInfo(
        self, request: pb.GetServerInfoRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetServerInfoResponse:
        decoded(request, "request")
        if self._worker:
            context.set_trailing_metadata(((WORKER_METADATA_KEY, self._worker),))
        info = self._env.server_info()
        return pb.GetServerInfoResponse(
            name=info["name"],
            version=info["version"],
            metrics=list(info["metrics"]),
            verify_request_schema_json=dumps_json(info["verify_request_schema"]),
            verify_response_schema_json=dumps_json(info["verify_response_schema"]),
            wants_rows=bool(info["wants_rows"]),
        )


WORKER_METADATA_KEY = "gym-metrics-worker"
_KIND_LABELS = {
    value: name.removeprefix("VERIFY_ERROR_KIND_").lower()
    for name, value in pb.VerifyErrorKind.items()
    if value
}
"""error_kind label values: the proto enum's names (invalid_request, timeout, verify_failed, ...)."""


def _agent_and_options(header: pb.AggregateMetricsHeader) -> tuple[str, AggregateOptions]:
    name = header.agent_ref.name
    violations = []
    if not name:
        violations.append(FieldViolation("header.agent_ref.name", "must not be empty"))
    expected_tasks = np.array(header.expected_task_indices, dtype=np.int64)
    for i in np.flatnonzero(expected_tasks < 0)[:20].tolist():
        violations.append(FieldViolation("header.expected_task_indices", f"must be >= 0, got {expected_tasks[i]}", i))
    if violations:
        raise InvalidInputError("invalid header", violations)
    options = AggregateOptions(
        include_rollout_infos=not header.options.omit_rollout_infos,
        expected_rollouts_per_task=header.expected_rollouts_per_task,
        expected_task_indices=expected_tasks.tolist(),
        count_errors_as_zero=header.options.count_errors_as_zero,
        include_samples=not header.options.omit_samples,
    )
    return name, options


def _check_items(request: pb.VerifyStreamRequest, message_no: int) -> None:
    """Indices are non-negative (the proto's contract); a bad one refuses the call."""
    if all(item.task_index >= 0 and item.rollout_index >= 0 for item in request.items):
        return
    violations = [
        FieldViolation(f"request[{message_no}].items[{i}].{name}", f"must be >= 0, got {value}")
        for i, item in enumerate(request.items)
        for name, value in (("task_index", item.task_index), ("rollout_index", item.rollout_index))
        if value < 0
    ]
    if violations:
        raise InvalidInputError("negative index", violations[:20])


def _fail(result: pb.VerifyResult, kind: int, message: str) -> None:
    result.reward = 0.0
    result.response_json = ""
    result.error_kind = kind  # type: ignore[assignment]
    result.error_message = message[:2000]


__all__ = ["ResourcesServicer"]
