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

from gym_metrics._transport.client._sessions import MAX_MESSAGE_BYTES, SessionLostError, ToolOutput, json_text, reset_of, step_of
from gym_metrics._transport.client._status import REJECTED, RemoteCallError, ServerBusyError, ServerUnavailableError
from gym_metrics.errors import InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

CALLS_PER_MESSAGE = 1024
"""Calls one message carries at most: with thousands of episodes in flight the queue holds more
than a server takes in one message (4,096, its MAX_CALLS_PER_MESSAGE); the rest go in the next."""
MESSAGE_BYTES = MAX_MESSAGE_BYTES - (256 << 10)
"""The text one message carries at most (the rest of a message is a few bytes a call): a call
past it is refused alone, naming its size, and calls that fit are never packed past it (a
message over grpc's limit broke the stream, and every episode on it started again)."""
CLOSE_WAIT_S = 2.0
"""How long `aclose` waits for the server to end the stream (it ends it once the calls it runs
are answered: a slow verify held Ctrl-C for good) before cancelling the stream."""

_CODE_NAMES = {3: "INVALID_ARGUMENT", 5: "NOT_FOUND", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION", 13: "INTERNAL", 14: "UNAVAILABLE"}


class SessionStream:
    """See the module docstring; `ResourcesClient.session_stream()` gives a connection's."""

    def __init__(self, stub: Any, metadata: Any) -> None:
        self._stub, self._metadata = stub, metadata
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[pb.SessionAnswer]] = {}
        self._outbox: list[pb.SessionCallsRequest] = []
        """Messages not sent yet; calls are written into the last one in place (no copies)."""
        self._last_bytes = 0
        """The text of the calls in the outbox's last message."""
        self._wake: asyncio.Future[None] | None = None
        """The writer's, while it waits for calls."""
        self._ending = False
        self._reader: asyncio.Task[None] | None = None

    async def seed_session(self, row: Mapping[str, Any] | str | bytes) -> str:
        text = json_text(row)
        call, answer = self._new(text, "the row")
        call.seed.body_json = text
        return str((await self._answer(answer)).seed.session_id)

    async def reset_session(self, row: Mapping[str, Any] | str | bytes) -> tuple[str, dict[str, Any]]:
        """Seed a session of an environment that answers turns: (its id, what its reset
        answered: {"observation", "info"})."""
        text = json_text(row)
        call, answer = self._new(text, "the row")
        call.seed.body_json = text
        seed = (await self._answer(answer)).seed
        return str(seed.session_id), reset_of(seed.reset_json)

    async def step(self, session_id: str, response: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
        """One step: {"observation", "reward", "terminated", "truncated", "info"}."""
        text = json_text(response)
        call, answer = self._new(text, "the step's response")
        call.step.session_id, call.step.response_json = session_id, text
        return step_of((await self._answer(answer)).step.step_json)

    async def call_tool(self, session_id: str, name: str, arguments: Mapping[str, Any] | str | bytes) -> ToolOutput:
        text = json_text(arguments)
        call, answer = self._new(text, f"the arguments of {name[:100]!r}")
        tool = call.call_tool
        tool.session_id, tool.name, tool.arguments_json = session_id, name, text
        output = (await self._answer(answer)).call_tool
        return ToolOutput(output.output, output.failed, output.status)

    async def verify_text(self, body: Mapping[str, Any] | str, session_id: str = "") -> tuple[float, str]:
        text = json_text(body)
        call, answer = self._new(text, "the rollout to verify")
        call.verify.body_json, call.verify.session_id = text, session_id
        verified = (await self._answer(answer)).verify
        return float(verified.reward), str(verified.response_json)

    async def close_session(self, session_id: str) -> bool:
        call, answer = self._new()
        call.close.session_id = session_id
        return bool((await self._answer(answer)).close.closed)

    async def aclose(self) -> None:
        """End the stream (the server closes the sessions still open on it), waiting at most
        CLOSE_WAIT_S for the server to end it, then cancelling it (its calls fail)."""
        self._ending = True
        self._wake_writer()
        reader = self._reader
        if reader is not None:
            done, _ = await asyncio.wait([reader], timeout=CLOSE_WAIT_S)
            if not done:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
        self._reader = None

    # ----------------------------------------------------------------- the stream

    def _new(self, text: str = "", what: str = "") -> tuple[pb.SessionCall, asyncio.Future[pb.SessionAnswer]]:
        """A call written into the next message (the caller fills it in with `text`, `what`
        it is, before it awaits) and the future of its answer; InvalidInputError for a text
        no message carries."""
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        if size > MESSAGE_BYTES:
            raise InvalidInputError(f"{what} is {size / 1e6:.1f} MB of JSON, past the {MAX_MESSAGE_BYTES >> 20} MiB one gRPC message carries")
        reader = self._reader
        if reader is None or reader.done():
            reader = self._open()
        outbox = self._outbox
        if not outbox or len(outbox[-1].calls) >= CALLS_PER_MESSAGE or self._last_bytes + size > MESSAGE_BYTES:
            outbox.append(pb.SessionCallsRequest())
            self._last_bytes = 0
            self._wake_writer()
        self._last_bytes += size
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
        self._outbox, self._ending, self._last_bytes = outbox, False, 0

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
