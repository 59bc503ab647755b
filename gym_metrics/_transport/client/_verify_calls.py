"""VerifyStream from the client: rollouts in, their outcomes out, whole batches in request order
or (`answer_each`) each rollout as it finishes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Sequence
from typing import Any

import grpc.aio

from gym_metrics._transport._verified import VerifiedBatch, VerifiedPart, VerifyOutcome
from gym_metrics._transport.client._status import ServerUnavailableError, translate
from gym_metrics._transport.client._verify_requests import VerifyInput, kept_errors, source_error, verify_batches, verify_request
from gym_metrics.v1 import resources_pb2 as pb


class VerifyCalls:
    """Mixed into ResourcesClient (which sets `_stub` and `_metadata`)."""

    _stub: Any
    _metadata: Any

    async def verify_stream(
        self, items: Iterable[VerifyInput] | AsyncIterable[VerifyInput], batch_size: int = 256, answer_each: bool = False
    ) -> AsyncIterator[VerifyOutcome]:
        """Verify many rollouts over one VerifyStream call; outcomes come in input order, or,
        with `answer_each`, as they finish (each names its task and rollout; one slow verify
        then holds back only itself). An error raised while reading or encoding `items` is
        raised as itself (grpc reports it as a cancelled call)."""
        failed: list[BaseException] = []
        call = self._stub.VerifyStream(kept_errors(verify_batches(items, batch_size, answer_each), failed), metadata=self._metadata)
        try:
            async for response in call:
                for outcome in VerifiedBatch.from_results(response.results).outcomes():
                    yield outcome
        except asyncio.CancelledError:
            if (error := source_error(failed)) is not None:
                raise error from None
            raise

    async def verify_batches(
        self, batches: AsyncIterable[tuple[str, Sequence[VerifyInput]]]
    ) -> AsyncIterator[tuple[str, list[VerifyOutcome]]]:
        """One VerifyStream call over caller-made batches: yields (batch_id, outcomes) as the
        server answers. Raises ServerUnavailableError when the stream breaks (retry it)."""
        async for batch_id, verified in self.verify_batch_columns(batches):
            yield batch_id, verified.outcomes()

    async def verify_batch_columns(
        self, batches: AsyncIterable[tuple[str, Sequence[VerifyInput]]]
    ) -> AsyncIterator[tuple[str, VerifiedBatch]]:
        """verify_batches with each answer column-wise (no object per rollout, responses
        left as JSON text), whole and in request order."""
        joined: list[pb.VerifyResult] = []  # a batch's answer in parts (`more`: it passed the message limit)
        async for response in self._verify_stream(batches, answer_each=False):
            if response.more:
                joined.extend(response.results)
                continue
            yield response.batch_id, VerifiedBatch.from_results([*joined, *response.results] if joined else response.results)
            joined = []

    async def verify_parts(self, batches: AsyncIterable[tuple[str, Sequence[VerifyInput]]]) -> AsyncIterator[VerifiedPart]:
        """One VerifyStream call asking `answer_each`: each batch's results as they finish, in
        parts of any batch in any order (what the collector uses: one slow verify holds back only
        itself). Raises ServerUnavailableError when the stream breaks (retry it)."""
        offsets: dict[str, int] = {}  # a batch answered whole in parts without positions: where the next starts
        async for response in self._verify_stream(batches, answer_each=True):
            batch_id, verified = response.batch_id, VerifiedBatch.from_results(response.results)
            positions: Sequence[int] = response.positions
            if not positions:
                start = offsets.pop(batch_id, 0)
                positions = range(start, start + len(verified))
                if response.more:
                    offsets[batch_id] = start + len(verified)
            yield VerifiedPart(batch_id, list(positions), verified, not response.more)

    async def _verify_stream(
        self, batches: AsyncIterable[tuple[str, Sequence[VerifyInput]]], answer_each: bool
    ) -> AsyncIterator[pb.VerifyStreamResponse]:
        async def requests() -> AsyncIterator[pb.VerifyStreamRequest]:
            async for batch_id, items in batches:
                yield verify_request(batch_id, items, answer_each)

        failed: list[BaseException] = []
        call = self._stub.VerifyStream(kept_errors(requests(), failed), metadata=self._metadata)
        try:
            async for response in call:
                yield response
        except grpc.aio.AioRpcError as exc:
            raise translate(exc) from None
        except asyncio.CancelledError:
            if (error := source_error(failed)) is not None:
                raise error from None  # the batches' source broke (a bad read, a SIGTERM), not the stream
            if _cancelled_by_us():
                raise
            # grpc cancels the call itself when sending on it fails (half-closing a call whose
            # connection just died), and reports that as CancelledError: a broken stream.
            raise ServerUnavailableError("the stream broke while sending (grpc cancelled the call)") from None


def _cancelled_by_us() -> bool:
    """Whether the running task is being cancelled (as opposed to grpc cancelling a call)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return task is None or cancelling is None or cancelling() > 0


__all__ = ["VerifyCalls"]
