"""SessionCalls: the session calls of many episodes multiplexed on one stream (per connection).

Each call is answered as it finishes, tagged with its id; a call that fails answers its error
(the code and message its unary RPC would give) and the stream goes on. Calls run concurrently,
at most MAX_IN_FLIGHT per stream counting those answered but not yet sent, and with at most
MAX_UNSENT_BYTES of answers waiting to be sent (the reader waits past either: a client that
sends calls and reads no answers holds a bounded amount of the server's memory); started
eagerly (a call that never suspends costs no Task); the answers ready together go out in one
message (a grpc.aio message costs about as much as a unary call: batching is where the stream
saves). Sessions seeded on the stream and still open when it ends (the client closed it, or went
away) are closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

from gym_metrics._transport._batches import dumps_json
from gym_metrics._transport.server._errors import status_of
from gym_metrics._transport.server._message_size import DEFAULT_MAX_MESSAGE_BYTES, messages
from gym_metrics._util.eager import start_eagerly
from gym_metrics.environments import EnvironmentHandler, Session, StepResult
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

log = logging.getLogger("gym_metrics.sessions")

MAX_IN_FLIGHT = 4096
"""Calls of one stream running or answered and not yet sent."""
MAX_UNSENT_BYTES = 64 << 20
"""Answers of one stream made and not yet sent, in bytes, past which no call is started."""
MAX_CALLS_PER_MESSAGE = 4096
"""Calls one SessionCalls message may carry; past it the stream ends with INVALID_ARGUMENT
(counted before any is started)."""
_YIELD_EVERY = 64
"""Calls started eagerly between turns the reader gives the loop (a call that never suspends
would otherwise hold it for the whole message)."""


async def session_calls(
    handler: EnvironmentHandler, requests: AsyncIterator[pb.SessionCallsRequest], client: str = "", max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> AsyncIterator[pb.SessionCallsResponse]:
    """The answers of a stream's calls, as they finish (those ready together in one message,
    at most `max_bytes`; an answer larger alone fails its call); `client` opens its sessions
    (Session.client)."""
    answers: asyncio.Queue[tuple[pb.SessionAnswer, int] | None] = asyncio.Queue()
    seeded: set[str] = set()
    slots = asyncio.Semaphore(MAX_IN_FLIGHT)  # (released as each answer is sent)
    running: set[asyncio.Future[None]] = set()
    unsent = [0]  # bytes of answers made and not yet sent
    room = asyncio.Event()

    async def one(request: pb.SessionCall) -> None:
        try:
            answer = await _answer(handler, request, seeded, client)
        except Exception as exc:  # this call's failure only
            status = status_of(exc)
            if status.code == 13:
                log.warning("a session call failed", exc_info=exc)
            answer = pb.SessionAnswer(id=request.id, error=pb.CallError(code=status.code, message=status.message))
        except BaseException:
            slots.release()
            raise
        size = answer.ByteSize()
        unsent[0] += size
        answers.put_nowait((answer, size))

    async def read() -> None:
        try:
            async for message in requests:
                if len(message.calls) > MAX_CALLS_PER_MESSAGE:
                    raise InvalidInputError(
                        "too many calls in one SessionCalls message",
                        [FieldViolation("calls", f"{len(message.calls):,} calls; at most {MAX_CALLS_PER_MESSAGE:,} (MAX_CALLS_PER_MESSAGE): send more messages")],
                    )
                for n, request in enumerate(message.calls, 1):
                    if n % _YIELD_EVERY == 0:
                        await asyncio.sleep(0)
                    while unsent[0] > MAX_UNSENT_BYTES:
                        room.clear()
                        await room.wait()
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
        ended = False
        while not ended:
            batch = [await answers.get()]
            while not answers.empty():
                batch.append(answers.get_nowait())
            ended = batch[-1] is None
            made = [a for a in batch if a is not None]
            if made:
                ready = [answer for answer, _ in made]
                message = pb.SessionCallsResponse(answers=ready)
                if message.ByteSize() <= max_bytes:  # one C call: the usual case costs no more
                    yield message
                else:
                    for part in messages(ready, max_bytes):
                        yield part
                unsent[0] -= sum(size for _, size in made)
                for _ in made:
                    slots.release()
                room.set()
        await reader  # its error (a broken stream), if any
    finally:
        reader.cancel()
        for task in list(running):
            task.cancel()
        for session_id in seeded:  # the client went away: its episodes are over
            await handler.sessions.close(session_id)


async def _answer(handler: EnvironmentHandler, request: pb.SessionCall, seeded: set[str], client: str) -> pb.SessionAnswer:
    kind = request.WhichOneof("call")
    if kind == "seed":
        session = await handler.sessions.seed(request.seed.body_json, client)
        session.held = True  # this stream closes it when it ends: no idle TTL while its episode waits on the policy
        seeded.add(session.id)
        return pb.SessionAnswer(id=request.id, seed=seed_answer(session))
    if kind == "call_tool":
        call = request.call_tool
        output, failed, status = await handler.sessions.call_tool(call.session_id, call.name, call.arguments_json)
        return pb.SessionAnswer(id=request.id, call_tool=pb.CallToolResponse(output=output, failed=failed, status=status))
    if kind == "verify":
        verify = request.verify
        try:
            reward, response_json = await handler.verify(verify.body_json, verify.session_id)
        except InvalidInputError:
            raise  # a refused body leaves the session open: still this stream's to close when it ends
        except BaseException:
            seeded.discard(verify.session_id)  # verify closed it
            raise
        seeded.discard(verify.session_id)
        return pb.SessionAnswer(id=request.id, verify=pb.VerifyResponse(reward=reward, response_json=response_json))
    if kind == "step":
        result = await handler.sessions.step(request.step.session_id, request.step.response_json)
        if result.terminated or result.truncated:
            seeded.discard(request.step.session_id)  # the step ended it
        return pb.SessionAnswer(id=request.id, step=step_answer(result))
    if kind == "close":
        seeded.discard(request.close.session_id)
        closed = await handler.sessions.close(request.close.session_id)
        return pb.SessionAnswer(id=request.id, close=pb.CloseSessionResponse(closed=closed))
    raise InvalidInputError("a session call holds no call", [FieldViolation(f"calls[id {request.id}].call", "set one of seed, call_tool, verify, close, step")])


def seed_answer(session: Session) -> pb.SeedSessionResponse:
    """A seeded session's answer: its id and, for an environment that answers turns, its reset."""
    reset = session.reset
    return pb.SeedSessionResponse(session_id=session.id, reset_json=dumps_json(reset.to_dict()) if reset is not None else "")


def step_answer(result: StepResult) -> pb.StepResponse:
    return pb.StepResponse(step_json=dumps_json(result.to_dict()), reward=result.reward, terminated=result.terminated, truncated=result.truncated)


def decoded_requests(requests: AsyncIterator[Any]) -> AsyncIterator[pb.SessionCallsRequest]:
    """The stream's requests, an undecodable one refused with INVALID_ARGUMENT (the stream ends)."""
    from gym_metrics._transport.server._handlers import decoded

    async def gen() -> AsyncIterator[pb.SessionCallsRequest]:
        n = 0
        async for request in requests:
            yield decoded(request, f"request[{n}]")
            n += 1

    return gen()
