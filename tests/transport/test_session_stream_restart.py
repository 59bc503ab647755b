"""A session stream that broke is replaced by a new one, and the broken stream's writer never
takes the new stream's calls. grpc may go on draining a dead call's request iterator: the old
writer, sharing the outbox, took the next calls into the dead call and their episodes waited
forever (a server SIGKILLed and restarted, about half the runs). Here a stub whose first call
breaks after one message and keeps draining its requests, as grpc's did."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from gym_metrics._transport.client._session_stream import SessionStream
from gym_metrics._transport.client._sessions import SessionLostError
from gym_metrics.v1 import resources_pb2 as pb

pytestmark = pytest.mark.timeout(30)


_END = pb.SessionCallsResponse()


class _Call:
    """One SessionCalls call: drains `requests` in a task of its own; answers every verify
    (reward 1.0), or, when `breaks`, raises UNAVAILABLE after the first message and drops the
    rest it still drains."""

    def __init__(self, requests: AsyncIterator[pb.SessionCallsRequest], breaks: bool) -> None:
        self.answers: asyncio.Queue[pb.SessionCallsResponse | None] = asyncio.Queue()
        self.breaks, self.dropped = breaks, 0
        self.drain = asyncio.ensure_future(self._drain(requests))

    async def _drain(self, requests: AsyncIterator[pb.SessionCallsRequest]) -> None:
        first = True
        async for message in requests:
            if self.breaks:
                self.dropped += len(message.calls)
                if first:
                    await self.answers.put(None)
                first = False
                continue
            answer = pb.SessionCallsResponse()
            for call in message.calls:
                done = answer.answers.add()
                done.id = call.id
                done.verify.reward = 1.0
            await self.answers.put(answer)
        await self.answers.put(_END)  # the client half-closed: the server ends the call

    def __aiter__(self) -> _Call:
        return self

    async def __anext__(self) -> pb.SessionCallsResponse:
        answer = await self.answers.get()
        if answer is _END:
            raise StopAsyncIteration
        if answer is None:
            raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "the server went away")
        return answer


class _Stub:
    def __init__(self) -> None:
        self.calls: list[_Call] = []

    def SessionCalls(self, requests: AsyncIterator[pb.SessionCallsRequest], metadata: Any = None) -> _Call:  # noqa: N802
        self.calls.append(_Call(requests, breaks=not self.calls))
        return self.calls[-1]


async def test_calls_after_a_broken_stream_go_to_the_new_one_and_are_answered() -> None:
    stub = _Stub()
    stream = SessionStream(stub, None)
    with pytest.raises(SessionLostError):
        await stream.verify_text({"a": 1})
    for _ in range(3):  # several rounds: the old writer had its chance to wake each time
        rewards = await asyncio.wait_for(asyncio.gather(*(stream.verify_text({"i": i}) for i in range(19))), 5)
        assert [r for r, _ in rewards] == [1.0] * 19
    assert len(stub.calls) == 2 and stub.calls[0].dropped == 1
    await stream.aclose()
    for call in stub.calls:
        call.drain.cancel()
