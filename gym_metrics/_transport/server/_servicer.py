"""ResourcesService over an EnvironmentHandler: each RPC converts its messages, calls the
handler (gym_metrics.environments, which knows no grpc), and converts the answer back.

Every method goes through `grpc_errors`, so exceptions become status codes in one place.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import grpc.aio
import numpy as np

from gym_metrics._transport._batches import batch_to_columns, dumps_json
from gym_metrics._transport._convert import MAX_PART_BYTES, aggregate_to_responses
from gym_metrics._transport.server._errors import grpc_errors
from gym_metrics._transport.server._handlers import decoded, peer_host
from gym_metrics._transport.server._message_size import DEFAULT_MAX_MESSAGE_BYTES, scores_answer, tool_answer
from gym_metrics._transport.server._session_calls import decoded_requests, seed_answer, session_calls, step_answer
from gym_metrics._transport.server._verify_stream import answers
from gym_metrics.aggregate import AggregateOptions
from gym_metrics.environments import INVALID_REQUEST, TIMEOUT, VERIFY_FAILED, Aggregation, EnvironmentHandler, Group, check_counts, hook, score_groups
from gym_metrics.errors import FieldViolation, InvalidInputError, OverloadedError, rerooted
from gym_metrics.rollouts import DuplicateKeysError
from gym_metrics.v1 import resources_pb2 as pb
from gym_metrics.v1 import resources_pb2_grpc

WORKER_METADATA_KEY = "gym-metrics-worker"
_KIND_TO_PB = {
    INVALID_REQUEST: pb.VERIFY_ERROR_KIND_INVALID_REQUEST,
    TIMEOUT: pb.VERIFY_ERROR_KIND_TIMEOUT,
    VERIFY_FAILED: pb.VERIFY_ERROR_KIND_VERIFY_FAILED,
}


M = TypeVar("M")

AGGREGATION_IDLE_S = 120.0
"""Seconds an AggregateMetrics call may go without sending its next message: a stalled client
held one of `--max-concurrent-aggregations` places for as long as its connection lived."""
SEED_ANSWER_MARGIN_S = 0.01
"""A session seeded with less of its call's deadline left is closed, the call failing
DEADLINE_EXCEEDED: its answer would likely reach the client after the client gave up, leaving a
session nobody knows the id of until its TTL."""


class ResourcesServicer(resources_pb2_grpc.ResourcesServiceServicer):
    """Serves one environment through its handler.

    Args:
        handler: the environment's calls (verify, batches, aggregation) and their limits.
        batch_cache_size: VerifyStream batch ids remembered per call, to answer a retried
            batch without verifying it again.
        max_inflight_batches: how far VerifyStream reads ahead of the answers being written,
            in default batches: that many times 256 rollouts unanswered and 16 MiB of requests
            held (memory stays bounded; _verify_stream.py).
        max_response_part_bytes: target size of each AggregateMetrics answer part.
        worker: "INDEX/COUNT" of a worker process sharing the port (`serve --workers`), sent
            with GetServerInfo as `gym-metrics-worker` trailing metadata: a client opening one
            connection per worker learns where each landed.
        max_message_bytes: the largest message the server sends; a VerifyStream batch's
            answer past it comes in parts (`more`), an answer past it alone fails its own
            rollout or call, never the stream with every rollout on it.
    """

    def __init__(
        self,
        handler: EnvironmentHandler,
        *,
        batch_cache_size: int = 256,
        max_inflight_batches: int = 4,
        max_response_part_bytes: int = MAX_PART_BYTES,
        worker: str = "",
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self._handler = handler
        self._max_bytes = max_message_bytes
        self._cache_size = batch_cache_size
        self._max_inflight = max_inflight_batches
        self._part_bytes = max_response_part_bytes
        self._worker = worker

    @grpc_errors
    async def Verify(self, request: pb.VerifyRequest, context: grpc.aio.ServicerContext) -> pb.VerifyResponse:
        request = decoded(request, "request")
        reward, response_json = await self._handler.verify(request.body_json, request.session_id)
        return pb.VerifyResponse(reward=reward, response_json=response_json)

    @grpc_errors
    async def SeedSession(self, request: pb.SeedSessionRequest, context: grpc.aio.ServicerContext) -> pb.SeedSessionResponse:
        sessions = self._handler.sessions
        session = await sessions.seed(decoded(request, "request").body_json, peer_host(context))
        remaining = context.time_remaining()
        if remaining is not None and remaining < SEED_ANSWER_MARGIN_S:  # its answer would come too late: nobody would know its id
            await sessions.close(session.id)
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, f"the call's deadline passed while its session was seeded ({remaining * 1000:.0f} ms left); the session is closed")
        return seed_answer(session)

    @grpc_errors
    async def Step(self, request: pb.StepRequest, context: grpc.aio.ServicerContext) -> pb.StepResponse:
        request = decoded(request, "request")
        return step_answer(await self._handler.sessions.step(request.session_id, request.response_json))

    @grpc_errors
    async def CallTool(self, request: pb.CallToolRequest, context: grpc.aio.ServicerContext) -> pb.CallToolResponse:
        request = decoded(request, "request")
        try:
            output, failed, status = await self._handler.sessions.call_tool(request.session_id, request.name, request.arguments_json)
        except InvalidInputError as exc:  # the tool's "arguments" (MCP's word) travel here as arguments_json
            raise rerooted(exc, "arguments", "arguments_json") from None
        return tool_answer(pb.CallToolResponse(output=output, failed=failed, status=status), self._max_bytes)

    @grpc_errors
    async def SessionCalls(
        self, request_iterator: AsyncIterator[pb.SessionCallsRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.SessionCallsResponse]:
        """Session calls multiplexed on one stream (see _session_calls.py)."""
        async for answer in session_calls(self._handler, decoded_requests(request_iterator), peer_host(context), self._max_bytes):
            yield answer

    @grpc_errors
    async def ScoreGroups(self, request: pb.ScoreGroupsRequest, context: grpc.aio.ServicerContext) -> pb.ScoreGroupsResponse:
        request = decoded(request, "request")
        check_counts(len(request.groups), 0)  # before a Group is built for each (score_groups counts completions)
        groups = [Group(g.row_json, list(g.completion_json), list(g.session_id), encoded=True) for g in request.groups]
        scored = await score_groups(self._handler, groups, omit_responses=request.omit_responses)
        response = pb.ScoreGroupsResponse()
        for s in scored:
            response.groups.add(
                rewards=s.rewards, failed=s.failed, error_message=s.error_message, response_json=s.response_json,
                error_kind=[_KIND_TO_PB.get(k, pb.VERIFY_ERROR_KIND_UNSPECIFIED) if k else pb.VERIFY_ERROR_KIND_UNSPECIFIED for k in s.error_kind],
            )  # fmt: skip
        return scores_answer(response, self._max_bytes)

    @grpc_errors
    async def CloseSession(self, request: pb.CloseSessionRequest, context: grpc.aio.ServicerContext) -> pb.CloseSessionResponse:
        return pb.CloseSessionResponse(closed=await self._handler.sessions.close(decoded(request, "request").session_id))

    @grpc_errors
    async def VerifyStream(
        self, request_iterator: AsyncIterator[pb.VerifyStreamRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.VerifyStreamResponse]:
        """Batches are verified ahead (bounded) while earlier answers are written: whole and in
        order, or rollout by rollout as they finish (`answer_each`; _verify_stream.py)."""
        slots = self._handler.slots()

        async def verify(request: pb.VerifyStreamRequest, response: pb.VerifyStreamResponse, finished: Callable[[int, int], None] | None) -> int:
            return await self._verify_batch(request, response, slots, finished)

        async for message in answers(
            _checked(request_iterator), verify, look_ahead=self._max_inflight, remember=self._cache_size, max_bytes=self._max_bytes
        ):  # fmt: skip
            yield message

    async def _verify_batch(
        self, request: pb.VerifyStreamRequest, response: pb.VerifyStreamResponse, slots: asyncio.Semaphore, finished: Callable[[int, int], None] | None
    ) -> int:
        """Each result is made in the response, in place (no copy of a finished message); the
        results' size in bytes at most (what the answer costs to keep, and whether it fits a
        message), counted from the text written, not by encoding the answer again."""
        items, add = request.items, response.results.add
        results = [add(task_index=item.task_index, rollout_index=item.rollout_index) for item in items]
        bodies = [item.body_json for item in items]
        write, written = _writer(results, finished)
        await self._handler.verify_batch(bodies, write, slots, lambda i: (items[i].task_index, items[i].rollout_index))
        return written()

    @grpc_errors
    async def AggregateMetrics(
        self, request_iterator: AsyncIterator[pb.AggregateMetricsRequest], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.AggregateMetricsResponse]:
        """Header, then batches; the answer comes in size-bounded parts. The work runs in a
        thread that stops when the client goes away (deadline, cancel, server shutdown)."""
        messages = _within(request_iterator, AGGREGATION_IDLE_S)
        try:
            first = decoded(await messages.__anext__(), "request[0]")
        except StopAsyncIteration:
            raise InvalidInputError(
                "empty stream", [FieldViolation("request[0]", "the stream is empty: it must start with a header")]
            ) from None
        if first.WhichOneof("payload") != "header":
            raise InvalidInputError(
                "stream must start with a header",
                [FieldViolation("request[0].header", f"first message holds {first.WhichOneof('payload') or 'nothing'}")],
            )
        agent, options = _agent_and_options(first.header)
        spans: list[tuple[int, str]] = []
        async with self._handler.aggregation(agent, options, first.ByteSize()) as call:
            try:
                await _receive(messages, call, spans)
                parts = await call.finish(
                    lambda result, received, duplicates: list(aggregate_to_responses(result, received, duplicates, self._part_bytes))
                )  # fmt: skip
            except DuplicateKeysError as exc:
                raise _named_by_message(exc, spans) from None
        for part in parts:
            yield part

    @grpc_errors
    async def GetServerInfo(
        self, request: pb.GetServerInfoRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetServerInfoResponse:
        """The environment's info, read in a thread: a ported NeMo Gym environment's schemas took
        about 120 ms of the event loop (every other call waiting) before they were kept."""
        decoded(request, "request")
        if self._worker:
            context.set_trailing_metadata(((WORKER_METADATA_KEY, self._worker),))
        return await asyncio.to_thread(self._server_info)

    def _server_info(self) -> pb.GetServerInfoResponse:
        info = hook(self._handler.env, "server_info")()
        return pb.GetServerInfoResponse(
            name=info["name"],
            version=info["version"],
            metrics=list(info["metrics"]),
            verify_request_schema_json=dumps_json(info["verify_request_schema"]),
            verify_response_schema_json=dumps_json(info["verify_response_schema"]),
            wants_rows=bool(info["wants_rows"]),
            tools=[
                pb.ToolInfo(name=t["name"], description=t["description"], parameters_json=dumps_json(t["parameters"]))
                for t in info.get("tools", ())
            ],
            any_tool_name=bool(info.get("any_tool_name")),
            steps=bool(info.get("steps")),
            agent_max_steps=dict(info.get("agent_max_steps") or {}),
            agent_types=dict(info.get("agent_types") or {}),
            agent_model_servers=dict(info.get("agent_model_servers") or {}),
            environment_servers={agent: pb.EnvironmentServerInfo(name=name, type=kind) for agent, (name, kind) in (info.get("environment_servers") or {}).items()},
        )


async def _within(messages: AsyncIterator[M], idle_s: float) -> AsyncIterator[M]:
    """`messages`, ended with OverloadedError when none comes for `idle_s` seconds."""
    stream = messages.__aiter__()
    while True:
        try:
            message = await asyncio.wait_for(stream.__anext__(), idle_s)
        except StopAsyncIteration:
            return
        except asyncio.TimeoutError:
            raise OverloadedError(f"the call sent nothing for {idle_s:g} s: ended, freeing its place among the aggregations running at once") from None
        yield message


async def _receive(messages: AsyncIterator[pb.AggregateMetricsRequest], call: Aggregation, spans: list[tuple[int, str]]) -> None:
    """Every batch of the stream into `call` (which holds the limits and drops resent batches).
    Rows in errors found at the end (duplicate keys) are numbered across the stream (0-based,
    counting every row of every batch sent): `spans` gets each batch taken's first row there and
    the field its keys came in (`request[2].batch.task_index`), for naming them."""
    message_no = 0
    async for message in messages:
        message_no += 1
        message = decoded(message, f"request[{message_no}]")
        call.received(message.ByteSize())
        payload = message.WhichOneof("payload")
        if payload != "batch":
            what = "a second header" if payload == "header" else "no payload"
            raise InvalidInputError(
                "only the first message may be a header",
                [FieldViolation(f"request[{message_no}].{payload or 'payload'}", f"got {what}; expected a batch")],
            )
        batch = message.batch
        place = call.batch(batch.batch_id, max(len(batch.task_index), len(batch.row_json)))
        if place is None:
            continue
        where, row_offset = f"request[{message_no}].batch", place[1]
        spans.append((row_offset, f"{where}.{'task_index' if len(batch.task_index) else 'row_json'}"))
        # Decoding columns is quick, parsing JSON rows is not: that goes off the loop.
        if len(batch.row_json):
            call.add(await asyncio.to_thread(batch_to_columns, batch, where, row_offset))
        else:
            call.add(batch_to_columns(batch, where, row_offset))


def _named_by_message(exc: DuplicateKeysError, spans: list[tuple[int, str]]) -> DuplicateKeysError:
    """The repeated keys named where the client sent them (`request[2].batch.task_index[1]`),
    not by their row's number across the stream."""
    starts = [start for start, _ in spans]

    def place(row: int) -> str:
        start, field_name = spans[max(bisect.bisect_right(starts, row) - 1, 0)]
        return f"{field_name}[{row - start}]"

    violations = [FieldViolation(place(b), f"duplicate key (task {t}, rollout {r}), also at {place(a)}") for t, r, a, b in exc.pairs]
    return DuplicateKeysError(exc.message, violations, exc.pairs) if spans and violations else exc


async def _checked(requests: AsyncIterator[Any]) -> AsyncIterator[tuple[pb.VerifyStreamRequest, int]]:
    """The stream's requests with their sizes (handlers.SIZED), each decoded and its indices
    checked (non-negative, the proto's contract); a bad one refuses the call."""
    message_no = -1
    async for received in requests:
        message_no += 1
        request, size = decoded(received, f"request[{message_no}]")
        if not all(item.task_index >= 0 and item.rollout_index >= 0 for item in request.items):
            violations = [
                FieldViolation(f"request[{message_no}].items[{i}].{name}", f"must be >= 0, got {value}")
                for i, item in enumerate(request.items)
                for name, value in (("task_index", item.task_index), ("rollout_index", item.rollout_index))
                if value < 0
            ]
            raise InvalidInputError("negative index", violations[:20])
        yield request, size


def _batch_id(request: pb.VerifyStreamRequest) -> str:
    return request.batch_id


RESULT_BYTES = 64
"""A VerifyResult's encoded bytes besides its two texts, at most (tags, lengths, indices,
reward, kind)."""


def _writer(
    results: list[pb.VerifyResult], finished: Callable[[int, int], None] | None
) -> tuple[Callable[[int, float, str, str | None, str], None], Callable[[], int]]:
    """Writes a rollout's outcome into its result message (and says so, for answer_each); and
    the bytes written so far, at most."""
    written = [0]

    def write(item: int, reward: float, response_json: str, kind: str | None, message: str) -> None:
        result = results[item]
        result.reward = reward
        result.response_json = response_json
        size = RESULT_BYTES + _utf8_size(response_json)
        if kind is not None:
            result.error_kind = _KIND_TO_PB[kind]
            result.error_message = message = message[:2000]
            size += _utf8_size(message)
        written[0] += size
        if finished is not None:
            finished(item, size)

    return write, lambda: written[0]


def _utf8_size(text: str) -> int:
    """`text`'s UTF-8 bytes (ASCII text, the usual JSON, without encoding it)."""
    return len(text) if text.isascii() else len(text.encode())


def _agent_and_options(header: pb.AggregateMetricsHeader) -> tuple[str, AggregateOptions]:
    name = header.agent_ref.name
    violations = []
    if not name:
        violations.append(FieldViolation("request[0].header.agent_ref.name", "must not be empty"))
    expected_tasks = np.array(header.expected_task_indices, dtype=np.int64)
    for i in np.flatnonzero(expected_tasks < 0)[:20].tolist():
        violations.append(FieldViolation("request[0].header.expected_task_indices", f"must be >= 0, got {expected_tasks[i]}", i))
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


__all__ = ["WORKER_METADATA_KEY", "ResourcesServicer"]
