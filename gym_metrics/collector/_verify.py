"""Verify rollouts through VerifyStream: bounded batches, bounded in flight, retried on outages.

Results are handed to `on_results` once per answered batch and a batch leaves the unanswered
set exactly then, so a batch resent after a broken stream is never recorded twice.

With several connections (one per server worker: SO_REUSEPORT spreads connections, not
calls), each connection is a lane with its own stream and retries; a batch belongs to the lane
that first sent it and is resent only there, and the in-flight bound is over all lanes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, Union

import orjson

from gym_metrics._transport import ResourcesClient, ServerUnavailableError, VerifiedBatch, VerifyInput
from gym_metrics.collector._input import Rollout

Batch = list[tuple[Rollout, bytes]]
OnResults = Callable[[Batch, VerifiedBatch], None]
"""Called once per answered batch: its rollouts (with bodies) and their results, in order."""


class BatchSource(Protocol):
    """Batches made asynchronously (generated first): `await next_batch()`, None at the end.
    It must be safe to cancel (a broken stream's reader may be)."""

    async def next_batch(self) -> Batch | None: ...


Batches = Union[Iterator[Batch], BatchSource]


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter; attempts reset whenever the server makes progress."""

    max_retries: int = 8
    base_s: float = 0.2
    max_s: float = 10.0

    def delay(self, attempt: int) -> float:
        return random.uniform(0, min(self.max_s, self.base_s * 2 ** (attempt - 1)))

    async def back_off(self, attempt: int, exc: Exception, log: Callable[[str], None]) -> None:
        """Wait before retry number `attempt`, or give up (re-raise) past max_retries."""
        if attempt > self.max_retries:
            raise ServerUnavailableError(f"{exc} (gave up after {self.max_retries} retries)") from None
        wait = self.delay(attempt)
        log(f"collect: server unavailable ({exc}); retry {attempt}/{self.max_retries} in {wait:.1f}s")
        await asyncio.sleep(wait)


def make_batches(rollouts: Iterator[Rollout], max_items: int, max_bytes: int) -> Iterator[Batch]:
    """Batches bounded by count and by encoded bytes (a single huge body still goes alone)."""
    batch: Batch = []
    size = 0
    try:
        for r in rollouts:
            body = orjson.dumps(r.row, option=orjson.OPT_SERIALIZE_NUMPY)
            if batch and (len(batch) >= max_items or size + len(body) > max_bytes):
                yield batch
                batch, size = [], 0
            batch.append((r, body))
            size += len(body)
    except Exception:
        if batch:  # the input failed (a bad line): what was read before it is still verified
            yield batch
        raise
    if batch:
        yield batch


class _Sender:
    """The batches of one verify_all: what is unanswered (and on which lane), what comes next,
    whether the input is done (or failed). Each stream (one per lane and retry) reads requests
    from here."""

    def __init__(self, batches: Batches, max_in_flight: int) -> None:
        self.batches = batches
        self.max_in_flight = max_in_flight
        self.unanswered: dict[str, tuple[Batch, int]] = {}
        self.exhausted = False
        self.input_error: Exception | None = None
        self.stream_no: dict[int, int] = {}
        self.room = asyncio.Condition()
        self._taking = asyncio.Lock()
        self._next_id = 0

    def owned(self, lane: int) -> int:
        """How many unanswered batches `lane` sent."""
        return sum(1 for _, owner in self.unanswered.values() if owner == lane)

    def new_stream(self, lane: int = 0) -> AsyncIterator[tuple[str, list[VerifyInput]]]:
        """The requests of a new stream on `lane`: from now on, that lane's older streams'
        readers send nothing."""
        mine = self.stream_no[lane] = self.stream_no.get(lane, 0) + 1
        resend = [(batch_id, batch) for batch_id, (batch, owner) in self.unanswered.items() if owner == lane]
        return self._requests(lane, mine, resend)

    async def _requests(
        self, lane: int, mine: int, resend: list[tuple[str, Batch]]
    ) -> AsyncIterator[tuple[str, list[VerifyInput]]]:
        """First the lane's batches unanswered when the stream began, then new ones while
        there is room; stops when a newer stream has started on the lane."""
        for batch_id, batch in resend:
            yield batch_id, _items(batch)
        while not self.exhausted:
            async with self.room:
                await self.room.wait_for(
                    lambda: len(self.unanswered) < self.max_in_flight or mine != self.stream_no[lane] or self.exhausted
                )
            if self.exhausted:
                return
            if mine != self.stream_no[lane]:
                # grpc does not cancel a broken call's request reader: it may ask for one more
                # batch, which it can no longer send. Leave new batches to the current stream,
                # or they would be lost until the next retry.
                return
            new = self._next_batch() if isinstance(self.batches, Iterator) else await self._next_made()
            if new is None:
                async with self.room:
                    self.room.notify_all()  # the other lanes' readers stop too
                return
            batch_id = str(self._next_id)
            self._next_id += 1
            self.unanswered[batch_id] = (new, lane)
            yield batch_id, _items(new)

    def _next_batch(self) -> Batch | None:
        assert isinstance(self.batches, Iterator)
        try:
            new = next(self.batches, None)
        except Exception as exc:
            # Raised inside grpc's request consumer it would only cancel the call (the caller
            # sees CancelledError): end the requests, let the batches already sent be answered
            # and recorded, then raise it from verify_all.
            self.input_error, new = exc, None
        if new is None:
            self.exhausted = True
        return new

    async def _next_made(self) -> Batch | None:
        """The source's next batch; one reader at a time (lanes share the source)."""
        assert not isinstance(self.batches, Iterator)
        async with self._taking:
            if self.exhausted:
                return None
            try:
                new = await self.batches.next_batch()
            except Exception as exc:
                self.input_error, new = exc, None
        if new is None:
            self.exhausted = True
        return new

    async def answered(self, batch_id: str) -> Batch | None:
        """The batch this answer is for (None if already recorded), freeing its room."""
        entry = self.unanswered.pop(batch_id, None)
        if entry is None:
            return None
        async with self.room:
            self.room.notify_all()
        return entry[0]


def _items(batch: Batch) -> list[VerifyInput]:
    return [(r.task, r.rollout, body) for r, body in batch]


async def verify_all(
    client: ResourcesClient | Sequence[ResourcesClient],
    batches: Batches,
    on_results: OnResults,
    *,
    max_in_flight: int = 8,
    retry: RetryPolicy | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> None:
    """Verify every batch over `client` (one connection, or several: one lane each), handing
    each answered batch to `on_results` once. A lane retries its own broken stream; one that
    gives up fails the whole call."""
    retry = retry or RetryPolicy()
    clients = list(client) if isinstance(client, Sequence) else [client]
    sender = _Sender(batches, max_in_flight)
    lanes = [asyncio.ensure_future(_lane(i, c, sender, on_results, retry, log)) for i, c in enumerate(clients)]
    try:
        await asyncio.gather(*lanes)
    except BaseException:
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
        raise
    if sender.input_error is not None:
        raise sender.input_error


async def _lane(
    lane: int,
    client: ResourcesClient,
    sender: _Sender,
    on_results: OnResults,
    retry: RetryPolicy,
    log: Callable[[str], None],
) -> None:
    attempt = 0
    while True:
        try:
            async for batch_id, verified in _answers(client, sender.new_stream(lane)):
                batch = await sender.answered(batch_id)
                if batch is None:
                    continue  # answered before the stream broke
                on_results(batch, verified)
                attempt = 0
            if sender.exhausted and not sender.owned(lane):
                return
            raise ServerUnavailableError("the server closed the stream with batches unanswered")
        except ServerUnavailableError as exc:
            attempt += 1
            await retry.back_off(attempt, exc, log)


def _answers(
    client: ResourcesClient, requests: AsyncIterator[tuple[str, list[VerifyInput]]]
) -> AsyncIterator[tuple[str, VerifiedBatch]]:
    """The client's answers column-wise; a client without verify_batch_columns (a test
    double, an older client) through its VerifyOutcome lists."""
    columns = getattr(client, "verify_batch_columns", None)
    if columns is not None:
        answers: AsyncIterator[tuple[str, VerifiedBatch]] = columns(requests)
        return answers
    return _from_outcomes(client, requests)


async def _from_outcomes(
    client: ResourcesClient, requests: AsyncIterator[tuple[str, list[VerifyInput]]]
) -> AsyncIterator[tuple[str, VerifiedBatch]]:
    async for batch_id, outcomes in client.verify_batches(requests):
        yield batch_id, VerifiedBatch.from_outcomes(outcomes)
