"""VerifyStream's answers: request batches verified ahead within bounds, each answered either
whole in request order or, when it asks `answer_each`, rollout by rollout as they finish.

Answering whole and in order, one slow verify (a judge's retry, a 60 s timeout) held its batch
and, once the look-ahead filled, every batch behind it: with 1% of verifies slow, most batches
held one and the stream ran at a fraction of its slots. With `answer_each` a finished result is
sent at the next turn of the loop, whatever is still running.

Work read ahead is bounded by rollouts not yet answered and by the bytes of the requests still
held (a batch is held until its last result is sent), never by a count of batches: a batch with
one slow rollout left holds one rollout of the budget, not a batch's worth. A batch id seen again
(a client's retry on the same call) is answered whole from its first answer, never verified
twice; the answers kept for that are bounded in bytes as the requests are (the oldest forgotten
first), and a batch id sent again with other rollouts is refused. Leaving early cancels
everything still running.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Optional

from gym_metrics._transport.server._message_size import parts, positioned_parts
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

Verify = Callable[[pb.VerifyStreamRequest, pb.VerifyStreamResponse, Optional[Callable[[int, int], None]]], Awaitable[Optional[int]]]
"""Writes a batch's results into the response in place (one per item, in request order),
calling `finished(i, size)` once result i is written when it is given (an answer_each batch;
`size`: the result's encoded bytes at most); returns the results' encoded bytes at most, or
None to have the answer measured when needed (ByteSize: a full encode of the answer)."""

ROLLOUTS_PER_LOOK_AHEAD = 256
"""Unanswered rollouts read ahead per unit of look-ahead (a default batch's)."""
BYTES_PER_LOOK_AHEAD = 16 << 20
"""Request bytes held per unit of look-ahead."""


class _Unit:
    """One admitted request: its full answer (written in place), the positions finished and not
    yet sent, how many were sent."""

    __slots__ = ("answer_bytes", "bytes", "each", "finished", "future", "header_bytes", "queued", "response", "sent", "size")

    def __init__(self, request: pb.VerifyStreamRequest, size: int) -> None:
        self.each = request.answer_each
        self.size = len(request.items)
        self.bytes = size
        self.header_bytes = 8 + len(request.batch_id.encode())  # (batch_id and more: tags, lengths, values)
        # the answer's encoded bytes at most: an answer_each batch's grows as its results finish
        self.answer_bytes: int | None = self.header_bytes if self.each else None
        self.response = pb.VerifyStreamResponse(batch_id=request.batch_id)
        self.finished: list[int] = []
        self.sent = 0
        self.queued = False
        self.future: asyncio.Future[pb.VerifyStreamResponse] | None = None


class _KeptAnswer:
    """A batch id's first answer, kept to answer a resend: what it was asked (its size and
    first and last rollouts, to refuse the id reused for other rollouts) and its answer's size."""

    __slots__ = ("asked", "bytes", "future", "key")

    def __init__(self, request: pb.VerifyStreamRequest, future: asyncio.Future[pb.VerifyStreamResponse]) -> None:
        self.key, self.asked, self.future, self.bytes = request.batch_id, _asked(request), future, 0


def _asked(request: pb.VerifyStreamRequest) -> tuple[int, ...]:
    items = request.items
    if not items:
        return (0,)
    return len(items), items[0].task_index, items[0].rollout_index, items[-1].task_index, items[-1].rollout_index


class _Answers:
    def __init__(self, verify: Verify, look_ahead: int, remember: int, max_bytes: int) -> None:
        self.verify, self.remember, self.max_bytes = verify, remember, max_bytes
        self.max_rollouts = look_ahead * ROLLOUTS_PER_LOOK_AHEAD
        self.max_held_bytes = look_ahead * BYTES_PER_LOOK_AHEAD
        self.open_units = self.open_rollouts = self.held_bytes = 0
        self.ordered: deque[_Unit] = deque()
        self.ready: deque[_Unit] = deque()
        self.cache: OrderedDict[str, _KeptAnswer] = OrderedDict()
        self.cache_bytes, self.requests = 0, 0
        self.running: set[asyncio.Future[pb.VerifyStreamResponse]] = set()
        self.wake, self.room = asyncio.Event(), asyncio.Event()
        self.error: BaseException | None = None

    def has_room(self) -> bool:
        """Always room for one batch; more while under both budgets."""
        return not self.open_units or (self.open_rollouts < self.max_rollouts and self.held_bytes < self.max_held_bytes)

    async def read(self, requests: AsyncIterator[tuple[pb.VerifyStreamRequest, int]]) -> None:
        try:
            async for request, size in requests:
                while not self.has_room():
                    self.room.clear()
                    await self.room.wait()
                self.admit(request, size)
        finally:
            self.wake.set()

    def admit(self, request: pb.VerifyStreamRequest, size: int) -> None:
        key = request.batch_id
        kept = self.cache.get(key) if key else None
        if kept is not None and kept.asked != _asked(request):
            why = f"{key!r} was answered for other rollouts earlier in this call (a resend must repeat its batch): give each batch its own id"
            raise InvalidInputError("a batch id reused for other rollouts", [FieldViolation(f"request[{self.requests}].batch_id", why)])
        self.requests += 1
        unit = _Unit(request, size)
        self.open_units += 1
        self.open_rollouts += unit.size
        self.held_bytes += unit.bytes
        resent = kept
        if resent is not None:  # a resend: answered whole from the first answer
            self.cache.move_to_end(key)
            unit.future = resent.future
        else:
            unit.future = asyncio.ensure_future(self._run(request, unit))
            self.running.add(unit.future)
            unit.future.add_done_callback(self.running.discard)
            if key:
                self.cache[key] = first = _KeptAnswer(request, unit.future)
                unit.future.add_done_callback(lambda future: self._kept(first, future, unit.answer_bytes))
                if len(self.cache) > self.remember:
                    self._forget()
        if not unit.each:
            self.ordered.append(unit)
        unit.future.add_done_callback(lambda future: self._done(unit, future, resent))

    async def _run(self, request: pb.VerifyStreamRequest, unit: _Unit) -> pb.VerifyStreamResponse:
        told = await self.verify(request, unit.response, self._finisher(unit) if unit.each else None)
        unit.answer_bytes = None if told is None else unit.header_bytes + told
        return unit.response

    def _finisher(self, unit: _Unit) -> Callable[[int, int], None]:
        def finished(position: int, size: int) -> None:
            unit.finished.append(position)
            if unit.answer_bytes is not None:
                unit.answer_bytes += size
            self._queue(unit)

        return finished

    def _queue(self, unit: _Unit) -> None:
        if not unit.queued:
            unit.queued = True
            self.ready.append(unit)
        self.wake.set()

    def _kept(self, kept: _KeptAnswer, future: asyncio.Future[pb.VerifyStreamResponse], size: int | None) -> None:
        """A kept answer counted in bytes once whole; the oldest forgotten past the budget."""
        if future.cancelled() or future.exception() is not None or self.cache.get(kept.key) is not kept:
            return
        kept.bytes = future.result().ByteSize() if size is None else size
        self.cache_bytes += kept.bytes
        while self.cache_bytes > self.max_held_bytes and len(self.cache) > 1:
            self._forget()

    def _forget(self) -> None:
        _, oldest = self.cache.popitem(last=False)
        self.cache_bytes -= oldest.bytes

    def _done(self, unit: _Unit, future: asyncio.Future[pb.VerifyStreamResponse], resent: _KeptAnswer | None) -> None:
        if resent is not None:
            unit.answer_bytes = resent.bytes or None  # (0: forgotten meanwhile, so unknown)
        if future.cancelled():
            self.error = self.error or asyncio.CancelledError()
        elif (exc := future.exception()) is not None:
            self.error = self.error or exc
        elif unit.each and resent is not None:  # nothing finished one by one: whole, from the first answer
            unit.response = future.result()
            unit.finished = list(range(unit.size))
            self._queue(unit)
        elif unit.each and not unit.size:
            self._queue(unit)
        elif unit.each and unit.sent + len(unit.finished) < unit.size:
            self.error = self.error or RuntimeError(f"batch {unit.response.batch_id!r}: verified without every result written")
        self.wake.set()

    def take(self) -> list[pb.VerifyStreamResponse]:
        """Every message that can be sent now: ordered answers at the front that are done, then
        what answer_each batches finished."""
        out: list[pb.VerifyStreamResponse] = []
        while self.ordered and self.ordered[0].future.done():  # type: ignore[union-attr]
            unit = self.ordered.popleft()
            out += parts(unit.future.result(), self.max_bytes, unit.answer_bytes)  # type: ignore[union-attr]
            self._sent(unit, unit.size)
        while self.ready:
            unit = self.ready.popleft()
            unit.queued = False
            finished, unit.finished = unit.finished, []
            if not unit.sent and len(finished) == unit.size:  # all of it at once: as an ordered answer
                out += parts(unit.response, self.max_bytes, unit.answer_bytes)
            else:
                finished.sort()
                last = unit.sent + len(finished) == unit.size
                out += positioned_parts(unit.response, finished, last, self.max_bytes)
            self._sent(unit, len(finished))
        return out

    def _sent(self, unit: _Unit, count: int) -> None:
        unit.sent += count
        self.open_rollouts -= count
        if unit.sent >= unit.size:
            self.open_units -= 1
            self.held_bytes -= unit.bytes
        self.room.set()


async def answers(
    requests: AsyncIterator[tuple[pb.VerifyStreamRequest, int]], verify: Verify, *, look_ahead: int, remember: int, max_bytes: int
) -> AsyncIterator[pb.VerifyStreamResponse]:
    """The stream's answers (module docstring) to its requests, each with its size in bytes.
    `look_ahead` scales the read-ahead budgets, `remember` is how many batch ids are kept to
    answer a resend, `max_bytes` the largest message sent (larger answers come in parts)."""
    state = _Answers(verify, look_ahead, remember, max_bytes)
    reader = asyncio.ensure_future(state.read(requests))
    try:
        while True:
            state.wake.clear()
            for message in state.take():
                yield message
            if state.error is not None:
                raise state.error
            if reader.done() and (not state.open_units or (reader.exception() is not None and not state.running)):
                await reader  # surfaces a failure to read the request stream, once what ran is sent
                return
            await state.wake.wait()
    finally:
        reader.cancel()
        for future in list(state.running):
            future.cancel()


__all__ = ["answers"]
