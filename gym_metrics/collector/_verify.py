"""Verify rollouts through VerifyStream: bounded batches, bounded in flight, retried on outages.

The server answers each rollout as it finishes (`answer_each`): results are handed to
`on_results` as they come, a rollout is recorded once, and a batch leaves the unanswered set
when its last rollout is recorded; a batch resent after a broken stream carries only its
rollouts not yet recorded. So one slow verify holds back only itself, and a run stopped midway
has written every rollout that was verified.

With several connections (one per server worker: SO_REUSEPORT spreads connections, not
calls; or one per replica, `collect --server A --server B`), each connection is a lane with its
own stream and retries. A batch belongs to the stream that sent it; when that stream breaks its
unanswered batches are orphaned and the next stream to ask for work, on any lane, resends them
(same ids) before anything new. A lane that gives up retires: the run fails only when every
lane has. The in-flight bounds (rollouts unrecorded, batches open) are over all lanes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, Union

from gym_metrics._transport.client import MAX_MESSAGE_BYTES, ResourcesClient, ServerUnavailableError, VerifiedBatch, VerifiedPart, VerifyInput
from gym_metrics._util.jsonio import dumps_finite
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.collector._input import Rollout
from gym_metrics.collector._options import RetryPolicy

Batch = list[tuple[Rollout, bytes]]
OnResults = Callable[[Batch, VerifiedBatch], None]
"""Called as results come: some rollouts (with bodies) and their results, in the same order;
each rollout once."""


class BatchSource(Protocol):
    """Batches made asynchronously (generated first): `await next_batch()`, None at the end.
    It must be safe to cancel (a broken stream's reader may be)."""

    async def next_batch(self) -> Batch | None: ...


Batches = Union[Iterator[Batch], BatchSource]

OPEN_BATCHES_PER_SLOT = 4
"""With a rollout budget, batches open (some of their rollouts unrecorded) per `max_in_flight`."""


MAX_BODY_BYTES = MAX_MESSAGE_BYTES - (64 << 10)
"""The largest row one VerifyStream message carries (the client's message limit, less room for
the message's own fields)."""


def too_large(size: int, line: int | None) -> InvalidInputError:
    """The error for a row no verify message can carry, naming its line and size."""
    why = (f"{size / (1 << 20):.1f} MB of JSON: past the {MAX_BODY_BYTES / (1 << 20):.1f} MB one verify message carries "
           "(gRPC's limit): shorten the row (a response or prompt that large is rarely meant), or leave it out with --on-bad-line skip")  # fmt: skip
    return InvalidInputError("a row too large to send", [FieldViolation("(the row)", why, line, row_name="line")])


def make_batches(rollouts: Iterator[Rollout], max_items: int, max_bytes: int) -> Iterator[Batch]:
    """Batches bounded by count and by encoded bytes (a single huge body still goes alone; one
    past what a message carries stops the run naming its line: Router.to_verify refuses most
    before, as bad lines)."""
    batch: Batch = []
    size = 0
    try:
        for r in rollouts:
            body = dumps_finite(r.row)
            if len(body) > MAX_BODY_BYTES:
                raise too_large(len(body), r.line)
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


@dataclass(frozen=True)
class LaneReport:
    """What each lane of a verify_all did: for the per-server counts, and so that phase 2 does
    not start on a server that went away."""

    answered: list[int]
    """Batches each lane had answered (recorded ones; late duplicates are not counted)."""
    retired: frozenset[int]
    """Lanes that gave up (their server stayed unreachable through the retries)."""


class _Open:
    """A batch sent and not wholly recorded: its rollouts as last sent (recorded ones dropped, so
    their bodies are not held) and how many are left."""

    __slots__ = ("batch", "left")

    def __init__(self, batch: Batch) -> None:
        self.batch: list[tuple[Rollout, bytes] | None] = list(batch)
        self.left = len(batch)

    def unrecorded(self) -> Batch:
        return [item for item in self.batch if item is not None]


class _Stream:
    """One VerifyStream call of a lane; dead once it broke or ended (its reader sends nothing)."""

    __slots__ = ("dead", "lane")

    def __init__(self, lane: int) -> None:
        self.lane, self.dead = lane, False


class _Sender:
    """The batches of one verify_all: what is unanswered (and which stream sent it), what was
    orphaned by a broken stream, what comes next, whether the input is done (or failed), which
    lanes retired. Each stream (one per lane and retry) reads its requests from here."""

    def __init__(self, batches: Batches, max_in_flight: int, lanes: int, max_rollouts: int | None) -> None:
        self.batches = batches
        self.max_in_flight = max_in_flight
        self.max_open = max_in_flight if max_rollouts is None else OPEN_BATCHES_PER_SLOT * max_in_flight
        self.max_rollouts = max_rollouts
        self.waiting = 0
        """Rollouts sent and not yet recorded."""
        self.unanswered: dict[str, _Open] = {}
        self.sent_on: dict[str, _Stream] = {}
        self.orphans: deque[str] = deque()
        self.exhausted = False
        self.input_error: Exception | None = None
        self.answered_by = [0] * lanes
        """Batches each lane had answered (recorded, not duplicates)."""
        self.active = set(range(lanes))
        self._changed = asyncio.Event()
        self._taking = asyncio.Lock()
        self._next_id = 0

    @property
    def done(self) -> bool:
        """The input is read and every batch of it answered."""
        return self.exhausted and not self.unanswered

    def _notify(self) -> None:
        """Wake every reader waiting for a change (synchronous: usable while cancelled)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _wait(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self._changed.wait()

    def new_stream(self, lane: int) -> _Stream:
        return _Stream(lane)

    def has_room(self) -> bool:
        return len(self.unanswered) < self.max_open and (self.max_rollouts is None or self.waiting < self.max_rollouts)

    def release(self, stream: _Stream) -> None:
        """The stream broke or ended: its unanswered batches are orphans, for any stream, to be
        sent again with only their rollouts not yet recorded."""
        stream.dead = True
        mine = [batch_id for batch_id, owner in self.sent_on.items() if owner is stream and batch_id in self.unanswered]
        for batch_id in mine:
            del self.sent_on[batch_id]
            self.unanswered[batch_id] = _Open(self.unanswered[batch_id].unrecorded())
        self.orphans.extend(sorted(mine, key=int))
        self._notify()

    def retire(self, lane: int) -> bool:
        """The lane gave up; True when it was the last one (the run cannot go on)."""
        self.active.discard(lane)
        return not self.active

    async def requests(self, stream: _Stream) -> AsyncIterator[tuple[str, list[VerifyInput]]]:
        """Orphans first, then new batches while there is room; ends when the stream is dead
        or everything is answered (kept open until then: a replica that dies later may leave
        orphans for this one)."""
        while True:
            await self._wait(
                lambda: stream.dead or self.done or bool(self.orphans)
                or (not self.exhausted and self.has_room())
            )  # fmt: skip
            if stream.dead or self.done:
                # grpc does not cancel a broken call's request reader: it may ask for one more
                # batch, which it can no longer send. Leave it to a live stream.
                return
            if self.orphans:
                batch_id = self.orphans.popleft()
                if batch_id in self.unanswered:
                    self.sent_on[batch_id] = stream
                    yield batch_id, _items(self.unanswered[batch_id].unrecorded())
                continue
            new = self._next_batch() if isinstance(self.batches, Iterator) else await self._next_made()
            if new is None:
                self._notify()  # the input ended: idle readers re-check whether all is done
                continue
            batch_id = str(self._next_id)
            self._next_id += 1
            self.unanswered[batch_id] = _Open(new)
            self.waiting += len(new)
            if stream.dead:  # broke while the batch was being made
                self.orphans.append(batch_id)
                self._notify()
                return
            self.sent_on[batch_id] = stream
            yield batch_id, _items(new)
            new = None  # held in `unanswered` until answered; not here while the next is made (collect's answer budget)

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

    def answered(self, part: VerifiedPart, lane: int) -> tuple[Batch, VerifiedBatch] | None:
        """The rollouts of this part not recorded before and their results (None when there are
        none: a late duplicate), freeing their room; the batch is done with its last rollout."""
        open_ = self.unanswered.get(part.batch_id)
        if open_ is None:
            return None
        batch, size = open_.batch, len(open_.batch)
        keep = [i for i, p in enumerate(part.positions) if 0 <= p < size and batch[p] is not None]
        if len(keep) < len(part.positions) and any(not 0 <= p < size for p in part.positions):
            raise ServerUnavailableError(f"the server answered a position past batch {part.batch_id}'s {size} rollouts")
        taken: Batch = []
        for i in keep:
            p = part.positions[i]
            taken.append(batch[p])  # type: ignore[arg-type]
            batch[p] = None
        open_.left -= len(taken)
        self.waiting -= len(taken)
        if open_.left == 0:
            del self.unanswered[part.batch_id]
            self.sent_on.pop(part.batch_id, None)
            self.answered_by[lane] += 1
        elif part.last:
            raise ServerUnavailableError(f"the server ended batch {part.batch_id}'s answer with {open_.left} of its rollouts unanswered")
        self._notify()
        if not taken:
            return None
        return taken, part.verified if len(keep) == len(part.positions) else part.verified.take(keep)


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
    names: Sequence[str] | None = None,
    max_rollouts: int | None = None,
) -> LaneReport:
    """Verify every batch over `client` (one connection, or several: one lane each), handing
    each result to `on_results` once, as it comes. A lane retries its own broken stream; one
    that gives up retires, and the call fails when the last one does. `names` (one per lane)
    name the server in retry messages. In flight: `max_in_flight` batches, or, given
    `max_rollouts`, that many rollouts unrecorded in up to OPEN_BATCHES_PER_SLOT times as many
    batches (a batch waiting on one slow rollout holds one rollout's room, not a batch's)."""
    retry = retry or RetryPolicy()
    clients = list(client) if isinstance(client, Sequence) else [client]
    sender = _Sender(batches, max_in_flight, len(clients), max_rollouts)
    whos = [f"server {n}" for n in names] if names else ["server"] * len(clients)
    lanes = [
        asyncio.ensure_future(_lane(i, c, sender, on_results, retry, log, whos[i])) for i, c in enumerate(clients)
    ]
    try:
        await asyncio.gather(*lanes)
    except BaseException:
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
        raise
    if sender.input_error is not None:
        raise sender.input_error
    return LaneReport(sender.answered_by, frozenset(range(len(clients))) - sender.active)


async def _lane(
    lane: int,
    client: ResourcesClient,
    sender: _Sender,
    on_results: OnResults,
    retry: RetryPolicy,
    log: Callable[[str], None],
    who: str,
) -> None:
    attempt = 0
    while True:
        stream = sender.new_stream(lane)
        try:
            async for part in _answers(client, sender.requests(stream)):
                taken = sender.answered(part, lane)
                if taken is None:
                    continue  # a late duplicate: recorded from another stream
                on_results(*taken)
                taken = None  # written: not held here while the next answer comes
                attempt = 0
            if sender.done:
                return
            exc = ServerUnavailableError("the server closed the stream with batches unanswered")
        except ServerUnavailableError as broke:
            exc = broke
        finally:
            sender.release(stream)
        if sender.done:
            return
        attempt += 1
        try:
            await retry.back_off(attempt, exc, log, who)
        except ServerUnavailableError:
            if sender.retire(lane):
                raise
            log(f"collect: {who} given up after {retry.max_retries} retries; its batches go to the other connections")
            return
        if sender.done:
            return  # the others finished meanwhile: no stream to a server that may be gone


def _answers(client: ResourcesClient, requests: AsyncIterator[tuple[str, list[VerifyInput]]]) -> AsyncIterator[VerifiedPart]:
    """The client's answers as they finish; a client without verify_parts (a test double, an
    older client) answers whole batches."""
    parts = getattr(client, "verify_parts", None)
    if parts is not None:
        answers: AsyncIterator[VerifiedPart] = parts(requests)
        return answers
    return _whole(client, requests)


async def _whole(client: ResourcesClient, requests: AsyncIterator[tuple[str, list[VerifyInput]]]) -> AsyncIterator[VerifiedPart]:
    async for batch_id, outcomes in client.verify_batches(requests):
        yield VerifiedPart(batch_id, range(len(outcomes)), VerifiedBatch.from_outcomes(outcomes), True)
