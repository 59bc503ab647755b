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
        self._outbox: asyncio.Queue[pb.SessionCall | None] | None = None
        self._reader: asyncio.Task[None] | None = None

    async def seed_session(self, row: Mapping[str, Any] | str | bytes) -> str:
        answer = await self._call(seed=pb.SeedSessionRequest(body_json=json_text(row)))
        return str(answer.seed.session_id)

    async def reset_session(self, row: Mapping[str, Any] | str | bytes) -> tuple[str, dict[str, Any]]:
        """Seed a session of an environment that answers turns: (its id, what its reset
        answered: {"observation", "info"})."""
        answer = await self._call(seed=pb.SeedSessionRequest(body_json=json_text(row)))
        return str(answer.seed.session_id), reset_of(answer.seed.reset_json)

    async def step(self, session_id: str, response: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """One step: {"observation", "reward", "terminated", "truncated", "info"}."""
        answer = await self._call(step=pb.StepRequest(session_id=session_id, response_json=json_text(response)))
        return step_of(answer.step.step_json)

    async def call_tool(self, session_id: str, name: str, arguments: Mapping[str, Any] | str | bytes) -> ToolOutput:
        answer = await self._call(call_tool=pb.CallToolRequest(session_id=session_id, name=name, arguments_json=json_text(arguments)))
        return ToolOutput(answer.call_tool.output, answer.call_tool.failed)

    async def verify_text(self, body: Mapping[str, Any] | str, session_id: str = "") -> tuple[float, str]:
        answer = await self._call(verify=pb.VerifyRequest(body_json=json_text(body), session_id=session_id))
        return float(answer.verify.reward), str(answer.verify.response_json)

    async def close_session(self, session_id: str) -> bool:
        answer = await self._call(close=pb.CloseSessionRequest(session_id=session_id))
        return bool(answer.close.closed)

    async def aclose(self) -> None:
        """End the stream (the server closes the sessions still open on it)."""
        if self._outbox is not None:
            self._outbox.put_nowait(None)
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        self._outbox = self._reader = None

    # ----------------------------------------------------------------- the stream

    async def _call(self, **call: Any) -> pb.SessionAnswer:
        if self._reader is None or self._reader.done():
            self._open()
        assert self._outbox is not None
        request_id = next(self._ids)
        future: asyncio.Future[pb.SessionAnswer] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._outbox.put_nowait(pb.SessionCall(id=request_id, **call))
        answer = await future
        if answer.WhichOneof("result") == "error":
            raise _error(answer.error.code, answer.error.message)
        return answer

    def _open(self) -> None:
        outbox: asyncio.Queue[pb.SessionCall | None] = asyncio.Queue()
        self._outbox = outbox

        async def requests() -> AsyncIterator[pb.SessionCallsRequest]:
            """The calls queued since the last message, in one message of at most
            CALLS_PER_MESSAGE (a grpc.aio message costs about as much as a unary call: batching
            is where the stream saves)."""
            while True:
                calls = [await outbox.get()]
                while len(calls) < CALLS_PER_MESSAGE and not outbox.empty():
                    calls.append(outbox.get_nowait())
                ready = [c for c in calls if c is not None]
                if ready:
                    yield pb.SessionCallsRequest(calls=ready)
                if len(ready) < len(calls):
                    return

        call = self._stub.SessionCalls(requests(), metadata=self._metadata)
        self._reader = asyncio.ensure_future(self._read(call))

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
