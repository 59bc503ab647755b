"""The request side of a VerifyStream call: rollouts grouped into batches of VerifyStreamRequest
(bodies given as JSON text sent as they are), and a request source whose own error is kept,
since grpc swallows what a request iterator raises and only cancels the call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from gym_metrics._transport._batches import dumps_json
from gym_metrics.v1 import resources_pb2 as pb

VerifyInput = tuple[int, int, "Mapping[str, Any] | str | bytes"]
"""(task_index, rollout_index, verify request body) of one rollout."""


def verify_request(batch_id: str, items: Sequence[VerifyInput], answer_each: bool = False) -> pb.VerifyStreamRequest:
    """One VerifyStream batch. Items are added in place (building VerifyItems and then
    copying them into the request costs twice), and bodies given as JSON text are not
    re-encoded: protobuf takes UTF-8 bytes for a string field as they are, checking them."""
    request = pb.VerifyStreamRequest(batch_id=batch_id, answer_each=answer_each)
    add = request.items.add
    for t, r, b in items:
        text = b if isinstance(b, (str, bytes)) else dumps_json(b)
        add(task_index=t, rollout_index=r, body_json=text)
    return request


async def verify_batches(
    items: Iterable[VerifyInput] | AsyncIterable[VerifyInput], batch_size: int, answer_each: bool = False
) -> AsyncIterator[pb.VerifyStreamRequest]:
    """Group items into VerifyStreamRequest batches with ids "0", "1", ..."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    batch: list[VerifyInput] = []
    number = 0
    async for item in _aiter(items):
        batch.append(item)
        if len(batch) >= batch_size:
            yield verify_request(str(number), batch, answer_each)
            number, batch = number + 1, []
    if batch:
        yield verify_request(str(number), batch, answer_each)


async def kept_errors(source: AsyncIterator[pb.VerifyStreamRequest], failed: list[BaseException]) -> AsyncIterator[pb.VerifyStreamRequest]:
    """`source` as a call's request iterator, what it raises kept in `failed`: grpc swallows a
    request iterator's error and cancels the call, so the caller raises it (`source_error`)
    where it would read a CancelledError, or a broken stream."""
    try:
        async for request in source:
            yield request
    except BaseException as exc:
        failed.append(exc)
        raise


def source_error(failed: list[BaseException]) -> BaseException | None:
    """The error a request source raised, unless it was only closed or cancelled with its call."""
    return failed[0] if failed and not isinstance(failed[0], (asyncio.CancelledError, GeneratorExit)) else None


async def _aiter(items: Iterable[VerifyInput] | AsyncIterable[VerifyInput]) -> AsyncIterator[VerifyInput]:
    if isinstance(items, AsyncIterable):
        async for item in items:
            yield item
    else:
        for item in items:
            yield item


__all__ = ["VerifyInput", "kept_errors", "source_error", "verify_batches", "verify_request"]
