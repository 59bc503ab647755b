"""Verify rollouts through VerifyStream: bounded batches, bounded in flight, retried on outages.

Results are handed to `on_results` once per answered batch and a batch leaves the unanswered
set exactly then, so a batch resent after a broken stream is never recorded twice.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass

import orjson

from gym_metrics._transport import ResourcesClient, ServerUnavailableError, VerifyInput, VerifyOutcome
from gym_metrics.collector._input import Rollout

Batch = list[tuple[Rollout, bytes]]


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


async def verify_all(
    client: ResourcesClient,
    batches: Iterator[Batch],
    on_results: Callable[[list[tuple[Rollout, VerifyOutcome]]], None],
    *,
    max_in_flight: int = 8,
    retry: RetryPolicy | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> None:
    retry = retry or RetryPolicy()
    unanswered: dict[str, Batch] = {}
    exhausted = False
    input_error: Exception | None = None
    next_id = 0
    attempt = 0
    stream_no = 0
    room = asyncio.Condition()

    while True:
        stream_no += 1
        resend = list(unanswered.items())

        async def requests(
            mine: int = stream_no, resend: list[tuple[str, Batch]] = resend
        ) -> AsyncIterator[tuple[str, list[VerifyInput]]]:
            # `mine` is this stream's number; `stream_no` (read late on purpose) the current one
            nonlocal next_id, exhausted, input_error
            for batch_id, batch in resend:
                yield batch_id, [(r.task, r.rollout, body) for r, body in batch]
            while not exhausted:
                async with room:
                    await room.wait_for(lambda: len(unanswered) < max_in_flight or mine != stream_no)
                if mine != stream_no:
                    # grpc does not cancel a broken call's request reader: it may ask for one
                    # more batch, which it can no longer send. Leave new batches to the
                    # current stream, or they would be lost until the next retry.
                    return
                new: Batch | None
                try:
                    new = next(batches, None)
                except Exception as exc:
                    # Raised inside grpc's request consumer it would only cancel the call (the
                    # caller sees CancelledError): end the requests, let the batches already
                    # sent be answered and recorded, then raise it from verify_all.
                    input_error, new = exc, None
                if new is None:
                    exhausted = True
                    return
                batch_id = str(next_id)
                next_id += 1
                unanswered[batch_id] = new
                yield batch_id, [(r.task, r.rollout, body) for r, body in new]

        try:
            async for batch_id, outcomes in client.verify_batches(requests()):
                batch = unanswered.pop(batch_id, None)
                if batch is None:
                    continue  # answered before the stream broke
                on_results([(r, o) for (r, _), o in zip(batch, outcomes)])
                attempt = 0
                async with room:
                    room.notify_all()
            if exhausted and not unanswered:
                if input_error is not None:
                    raise input_error
                return
            raise ServerUnavailableError("the server closed the stream with batches unanswered")
        except ServerUnavailableError as exc:
            attempt += 1
            await retry.back_off(attempt, exc, log)
