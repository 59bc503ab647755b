"""SessionCalls: the session calls of many episodes multiplexed on one stream (per connection).

Each request is answered as it finishes, tagged with its id; a call that fails answers its
error (the code and message its unary RPC would give) and the stream goes on. Calls run
concurrently, at most MAX_IN_FLIGHT per stream (the reader waits past it), started eagerly (a
call that never suspends costs no Task). Sessions seeded on the stream and still open when it
ends (the client closed it, or went away) are closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from gym_metrics._transport.server._errors import status_of
from gym_metrics._util.eager import start_eagerly
from gym_metrics.environments import EnvironmentHandler
from gym_metrics.v1 import resources_pb2 as pb

log = logging.getLogger("gym_metrics.sessions")

MAX_IN_FLIGHT = 4096
"""Calls of one stream running at once."""


async def session_calls(handler: EnvironmentHandler, requests: AsyncIterator[pb.SessionCallsRequest]) -> AsyncIterator[pb.SessionCallsResponse]:
    """The answers of a stream's requests, as they finish."""
    answers: asyncio.Queue[pb.SessionCallsResponse | None] = asyncio.Queue()
    seeded: set[str] = set()
    slots = asyncio.Semaphore(MAX_IN_FLIGHT)
    running: set[asyncio.Future[None]] = set()

    async def one(request: pb.SessionCallsRequest) -> None:
        try:
            answer = await _answer(handler, request, seeded)
        except Exception as exc:  # this call's failure only
            status = status_of(exc)
            if status.code == 13:
                log.warning("a session call failed", exc_info=exc)
            answer = pb.SessionCallsResponse(id=request.id, error=pb.CallError(code=status.code, message=status.message))
        finally:
            slots.release()
        answers.put_nowait(answer)

    async def read() -> None:
        try:
            async for request in requests:
                await slots.acquire()
                done, value = start_eagerly(one(request))
                if not done:
                    running.add(value)  # type: ignore[arg-type]
                    value.add_done_callback(running.discard)  # type: ignore[union-attr]
            if running:
                await asyncio.gather(*list(running))
        finally:
            answers.put_nowait(None)

    reader = asyncio.ensure_future(read())
    try:
        while (answer := await answers.get()) is not None:
            yield answer
        await reader  # its error (a broken stream), if any
    finally:
        reader.cancel()
        for task in list(running):
            task.cancel()
        for session_id in seeded:  # the client went away: its episodes are over
            await handler.episodes.close(session_id)


async def _answer(handler: EnvironmentHandler, request: pb.SessionCallsRequest, seeded: set[str]) -> pb.SessionCallsResponse:
    kind = request.WhichOneof("call")
    if kind == "seed":
        session = await handler.episodes.seed(request.seed.body_json)
        seeded.add(session.id)
        return pb.SessionCallsResponse(id=request.id, seed=pb.SeedSessionResponse(session_id=session.id))
    if kind == "call_tool":
        call = request.call_tool
        output, failed = await handler.episodes.call_tool(call.session_id, call.name, call.arguments_json)
        return pb.SessionCallsResponse(id=request.id, call_tool=pb.CallToolResponse(output=output, failed=failed))
    if kind == "verify":
        verify = request.verify
        seeded.discard(verify.session_id)
        reward, response_json = await handler.verify(verify.body_json, verify.session_id)
        return pb.SessionCallsResponse(id=request.id, verify=pb.VerifyResponse(reward=reward, response_json=response_json))
    if kind == "close":
        seeded.discard(request.close.session_id)
        closed = await handler.episodes.close(request.close.session_id)
        return pb.SessionCallsResponse(id=request.id, close=pb.CloseSessionResponse(closed=closed))
    from gym_metrics.errors import FieldViolation, InvalidInputError

    raise InvalidInputError("a SessionCalls request holds no call", [FieldViolation(f"request {request.id}.call", "set one of seed, call_tool, verify, close")])


def decoded_requests(requests: AsyncIterator[Any]) -> AsyncIterator[pb.SessionCallsRequest]:
    """The stream's requests, an undecodable one refused with INVALID_ARGUMENT (the stream ends)."""
    from gym_metrics._transport.server._handlers import decoded

    async def gen() -> AsyncIterator[pb.SessionCallsRequest]:
        n = 0
        async for request in requests:
            yield decoded(request, f"request[{n}]")
            n += 1

    return gen()
