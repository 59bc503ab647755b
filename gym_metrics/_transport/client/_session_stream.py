"""The client of SessionCalls: seed, call_tool, verify, close and step for many episodes over one
stream per connection, each call a future resolved by its answer's id.

The stream opens on first use. When it breaks (the server went away), every call waiting on it
fails with SessionLostError (its sessions ended with the stream: the episode starts again) and
the next call opens a new stream. A call's own failure raises what its unary RPC would
(InvalidInputError, SessionLostError, RemoteCallError, ServerUnavailableError for a busy
server).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Mapping
from typing import Any

import grpc.aio

from gym_metrics._transport.client._sessions import SessionLostError, ToolOutput, json_text, reset_of, step_of
from gym_metrics._transport.client._status import REJECTED, RemoteCallError, ServerBusyError, ServerUnavailableError
from gym_metrics.errors import InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

CALLS_PER_MESSAGE = 1024
"""Calls one message carries at most: with thousands of episodes in flight the queue holds more
than a server takes in one message (4,096, its MAX_CALLS_PER_MESSAGE); the rest go in the next."""

_CODE_NAMES = {3: "INVALID_ARGUMENT", 5: "NOT_FOUND", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 13: "INTERNAL", 14: "UNAVAILABLE"}


class SessionStream:
    """See the module docstring; `ResourcesClient.session_stream()` gives a connection's."""

    def __init__(self, stub: Any, metadata: Any) -> None:
        self._stub, self._metadata = stub, metadata
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[pb.SessionAnswer]] = {}
        self._outbox: list[pb.SessionCallsRequest] = []
        """Messages not sent yet; calls are written into the last one in place (no copies)."""
        self._wake: asyncio.Future[None] | None = None
        """The writer's, while it waits for calls."""
        self._ending = False
        self._reader: asyncio.Task[None] | None = None

    async def seed_session(self, row: Mapping[str, Any] | str | bytes) -> str:
        call, answer = self._new()
        call.seed.body_json = json_text(row)
        return str((await self._answer(answer)).seed.session_id)

    async def reset_session(self, row: Mapping[str, Any] | str | bytes) -> tuple[str, dict[str, Any]]:
        """Seed a session of an environment that answers turns: (its id, what its reset
        answered: {"observation", "info"})."""
        call, answer = self._new()
        call.seed.body_json = json_text(row)
        seed = (await self._answer(answer)).seed
        return str(seed.session_id), reset_of(seed.reset_json)

    async def step(self, session_id: str, response: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """One step: {"observation", "reward", "terminated", "truncated", "info"}."""
        call, answer = self._new()
        call.step.session_id, call.step.response_json = session_id, json_text(response)
        return step_of((await self._answer(answer)).step.step_json)

    async def call_tool(self, session_id: str, name: str, arguments: Mapping[str, Any] | str | bytes) -> ToolOutput:
        call, answer = self._new()
        tool = call.call_tool
        tool.session_id, tool.name, tool.arguments_json = session_id, name, json_text(arguments)
        output = (await self._answer(answer)).call_tool
        return ToolOutput(output.output, output.failed, output.status)

    async def verify_text(self, body: Mapping[str, Any] | str, session_id: str = "") -> tuple[float, str]:
        call, answer = self._new()
        call.verify.body_json, call.verify.session_id = json_text(body), session_id
        verified = (await self._answer(answer)).verify
        return float(verified.reward), str(verified.response_json)

    async def close_session(self, session_id: str) -> bool:
        call, answer = self._new()
        call.close.session_id = session_id
        return bool((await self._answer(answer)).close.closed)

    async def aclose(self) -> None:
        """End the stream (the server closes the sessions still open on it)."""
        self._ending = True
        self._wake_writer()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        self._reader = None

    # ----------------------------------------------------------------- the stream

    def _new(self) -> tuple[pb.SessionCall, asyncio.Future[pb.SessionAnswer]]:
        """A call written into the next message (the caller fills it in before it awaits)
        and the future of its answer."""
        reader = self._reader
        if reader is None or reader.done():
            reader = self._open()
        outbox = self._outbox
        if not outbox or len(outbox[-1].calls) >= CALLS_PER_MESSAGE:
            outbox.append(pb.SessionCallsRequest())
            self._wake_writer()
        call = outbox[-1].calls.add()
        call.id = request_id = next(self._ids)
        answer: asyncio.Future[pb.SessionAnswer] = reader.get_loop().create_future()  # (not get_running_loop: a system call on 3.11)
        self._pending[request_id] = answer
        return call, answer

    @staticmethod
    async def _answer(future: asyncio.Future[pb.SessionAnswer]) -> pb.SessionAnswer:
        answer = await future
        if answer.HasField("error"):
            raise _error(answer.error.code, answer.error.message)
        return answer

    def _wake_writer(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def _open(self) -> asyncio.Task[None]:
        # A stream's own outbox: calls queued for a stream that broke failed with it, and its
        # writer, which grpc may still be draining, must never take the next stream's calls
        # (it sent them into the dead call, and their episodes waited forever).
        outbox: list[pb.SessionCallsRequest] = []
        self._outbox, self._ending = outbox, False

        async def requests() -> AsyncIterator[pb.SessionCallsRequest]:
            """The messages queued since the last one went, each of at most
            CALLS_PER_MESSAGE calls (a grpc.aio message costs about as much as a unary call:
            batching is where the stream saves). Ends once a newer stream took over."""
            while self._outbox is outbox:
                if not outbox and not self._ending:
                    wake = self._wake = asyncio.get_running_loop().create_future()
                    await wake
                    if self._wake is wake:
                        self._wake = None
                    continue
                while outbox:
                    yield outbox.pop(0)
                if self._ending:
                    return

        call = self._stub.SessionCalls(requests(), metadata=self._metadata)
        self._reader = reader = asyncio.ensure_future(self._read(call))
        return reader

    async def _read(self, call: Any) -> None:
        failure: BaseException = SessionLostError("the session stream ended: its sessions are gone")
        try:
            async for message in call:
                for answer in message.answers:
                    future = self._pending.pop(answer.id, None)
                    if future is not None and not future.done():
                        future.set_result(answer)
        except grpc.aio.AioRpcError as exc:
            failure = SessionLostError(f"the session stream broke ({exc.code().name}: {exc.details()}): its sessions are gone")
        except asyncio.CancelledError:
            failure = SessionLostError("the session stream was cancelled")
        finally:
            pending, self._pending = self._pending, {}
            for future in pending.values():
                if not future.done():
                    future.set_exception(failure)


def _error(code: int, message: str) -> Exception:
    if code == 3:
        return InvalidInputError(f"{REJECTED}{message}")
    if code == 5 and "no live session" in message:
        return SessionLostError(message)
    if code == 8:
        return ServerBusyError(f"RESOURCE_EXHAUSTED: {message}")
    if code == 14:
        return ServerUnavailableError(f"UNAVAILABLE: {message}")
    return RemoteCallError(_CODE_NAMES.get(code, str(code)), message)
