"""The reward client every trainer adaptor shares: one pooled gRPC channel per process and
server, concurrent calls batched into one ScoreGroups call, usable from synchronous code and
from any event loop.

The channel lives on a background thread's event loop (a trainer's own loop, or none, never
owns it), with one connection per server worker (`serve --workers N`), used in turn. Batching
is Nagle's: while fewer than two calls per connection are in flight, what was submitted goes
out at once (groups submitted together, as TRL's async reward functions of one step, share a
call); past that, groups wait for a call to finish and then go out together (verl's per-sample
calls from a thread pool), at most `max_batch_completions` completions and MAX_CALL_BYTES a call
(a batch past either goes as several calls). Each group is encoded when it is submitted: one
JSON cannot hold fails alone, its completions failed and the part named. Each group's answer
carries its rewards with a failed flag beside each; what a failure becomes is the adaptor's
choice (`on_failure`). A server that is restarting or unreachable is retried (`max_retries`,
backoff with jitter): the trainer waits and loses nothing; a call past its deadline
(`timeout_s`: the server is up, its verify slower than that) is not, as it would only be slow
again. With `record`, the scored completions are written (and synced) before the trainer gets
their rewards, so a killed trainer's file holds every reward it was told of; processes that
record to one file (ranks of one run) number their groups in turn, under a file lock.

gRPC cannot run in a process forked from one that had used it (the child hangs or aborts in
grpc's core): such a child is refused at once with a RewardFailure that says what to do.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from gym_metrics.integrations._recording import append_rows, cut_partial_line

if TYPE_CHECKING:
    from gym_metrics._transport.client import RemoteCallError

Groups = Sequence[tuple[Any, Sequence[Any]]]
"""(task row: a dict or JSON text, completions: each a text or a Responses object) per group."""


@dataclass
class _Item:
    """One submitted group: encoded for the wire, its size, its future, and what recording needs."""

    group: Any
    size: int
    future: Future[Scored]
    row: Any
    step: int | None


MAX_CALL_BYTES = 16 << 20
"""A ScoreGroups call's request at most (the server reads up to 64 MB by default): a batch past
it goes as several calls, so many small groups never fail together for their sum. A server
that takes less (`serve --max-message-mb 1`) refuses a call for its size: the call is split in
two and each half sent again, and later calls are cut at half the refused size."""

_CLIENTS: dict[tuple[int, str, str | None], RewardClient] = {}
_CLIENTS_LOCK = threading.Lock()
_GRPC_USED_BY: int | None = None
"""The pid of the process that opened a channel (a child forked after it cannot use gRPC)."""


@dataclass(frozen=True)
class Scored:
    """One group's answer: position i for completion i."""

    rewards: list[float]
    failed: list[bool]
    errors: list[str]
    responses: list[str]
    """The verify responses as JSON text ("" where failed, or when not asked for)."""


def _too_large(exc: RemoteCallError) -> bool:
    """The server refused the call for its size (gRPC's own RESOURCE_EXHAUSTED)."""
    return exc.code == "RESOURCE_EXHAUSTED" and "larger than max" in exc.details


class RewardFailure(RuntimeError):
    """A completion could not be scored (`on_failure="raise"`): the message says which and why."""


def reward_client(server: str, *, token: str | None = None, timeout_s: float | None = None) -> RewardClient:
    """The process's client of `server` (HOST:PORT), made on first use; `timeout_s` (a call's
    deadline, RewardClient's) set on it when given."""
    if timeout_s is not None and not timeout_s > 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
    if "://" in server:  # gRPC takes HOST:PORT; a URL's scheme failed after 5 s of retries as a "misformatted domain name"
        raise ValueError(f"server {server!r}: give HOST:PORT (the gRPC address serve prints), without a scheme")
    key = (os.getpid(), server, token)  # a spawned trainer worker gets a client of its own
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = RewardClient(server, token=token)
        if timeout_s is not None:
            client.timeout_s = float(timeout_s)
        return client


class RewardClient:
    """See the module docstring. Prefer `reward_client(server)`: one per process and server."""

    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        max_batch_completions: int = 4096,
        timeout_s: float = 180.0,
        max_retries: int = 8,
        record: str | Path | None = None,
    ) -> None:
        self.server, self.token, self.max_retries = server, token, max_retries
        self.max_batch_completions, self.timeout_s = max_batch_completions, timeout_s
        self.record_path = Path(record) if record is not None else None
        self.max_call_bytes = MAX_CALL_BYTES
        if self.record_path is not None:
            cut_partial_line(self.record_path)
        self._record_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        """A fresh loop thread and no connection yet (at construction, and on use after close)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"gym-metrics rewards {self.server}", daemon=True)
        self._thread.start()
        self._pending: list[_Item] = []
        self._pending_size = [0, 0]
        """Completions and bytes of `_pending` (kept as it grows: verl submits one sample at a time)."""
        self._flush: asyncio.Handle | None = None
        self._client: Any = None
        self._connections: list[Any] = []
        self._turn = 0
        self._in_flight = 0
        self._want_responses = False
        self._beat = time.monotonic()
        self._loop.call_soon_threadsafe(self._heartbeat)

    def _heartbeat(self) -> None:
        """The loop's pulse: `score` tells a stuck loop from a long queue by it."""
        self._beat = time.monotonic()
        self._loop.call_later(0.5, self._heartbeat)

    # ----------------------------------------------------------------- public

    def score(self, groups: Groups, *, responses: bool = False, step: int | None = None) -> list[Scored]:
        """Score `(task row, completions)` groups, blocking (from synchronous code). `step`
        (the trainer's step) names the recorded rows' agent (`step_<n>`)."""
        futures = self.submit(groups, responses=responses, step=step)
        return [self._wait(f) for f in futures]

    def _wait(self, future: Future[Scored]) -> Scored:
        """The group's answer. Every future settles (each call has its deadline and bounded
        retries, however long the group queued behind others); this only watches that the
        client is not closed meanwhile, nor its loop stuck for timeout_s + 5 s."""
        thread = self._thread
        while True:
            if wait((future,), timeout=0.5).done:  # (not result(timeout=): since 3.11 its TimeoutError is the one a late call raises)
                return future.result()
            if not thread.is_alive():
                raise RewardFailure(f"the reward client of {self.server} was closed while scoring")
            if time.monotonic() - self._beat > self.timeout_s + 5:
                raise TimeoutError(f"no rewards from {self.server} within {self.timeout_s + 5:g} s (timeout_s {self.timeout_s:g}): the client's loop is stuck")

    async def score_async(self, groups: Groups, *, responses: bool = False, step: int | None = None) -> list[Scored]:
        """Score groups from any event loop (the caller's loop waits, it never runs the call)."""
        futures = self.submit(groups, responses=responses, step=step)
        return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))

    def submit(self, groups: Groups, *, responses: bool = False, step: int | None = None) -> list[Future[Scored]]:
        """Queue groups for the next batched call; a future per group (a group JSON cannot
        hold is answered at once, every completion failed, saying which part)."""
        from gym_metrics._transport.client import encoded_group

        if _GRPC_USED_BY is not None and _GRPC_USED_BY != os.getpid():
            raise RewardFailure(
                "this process was forked from one that had used gRPC (multiprocessing or a ProcessPoolExecutor with the "
                "'fork' start method), and gRPC cannot run in it (it would hang): score in the parent process, or start "
                "the workers with 'spawn' or 'forkserver' (multiprocessing.get_context('spawn'))"
            )  # fmt: skip
        items: list[_Item] = []
        futures: list[Future[Scored]] = []
        for row, completions in groups:
            future: Future[Scored] = Future()
            futures.append(future)
            try:
                group = encoded_group(row, completions)
            except TypeError as exc:
                count = len(completions)
                future.set_result(Scored([0.0] * count, [True] * count, [f"cannot be sent: {exc}"] * count, [""] * count))
                continue
            items.append(_Item(group, group.ByteSize(), future, row, step))
        if items:
            with self._start_lock:
                if not self._thread.is_alive():  # closed: made again on use
                    self._start()
                self._loop.call_soon_threadsafe(self._enqueue, items, responses or self.record_path is not None)
        return futures

    def close(self) -> None:
        """Close the channel and stop the thread (the process's client is made again on use)."""
        if not self._loop.is_running():
            return
        asyncio.run_coroutine_threadsafe(self._aclose(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        with _CLIENTS_LOCK:
            for key, client in list(_CLIENTS.items()):
                if client is self:
                    del _CLIENTS[key]

    # ----------------------------------------------------------------- loop side

    def _enqueue(self, items: list[_Item], responses: bool) -> None:
        self._want_responses = self._want_responses or responses
        self._pending.extend(items)
        self._pending_size[0] += sum(len(item.group.completion_json) for item in items)
        self._pending_size[1] += sum(item.size for item in items)
        if self._pending_size[0] >= self.max_batch_completions or self._pending_size[1] >= self.max_call_bytes:
            self._send()
        elif self._flush is None and self._in_flight < 2 * max(1, len(self._connections)):
            self._flush = self._loop.call_soon(self._send)  # what this loop turn brings goes along

    def _send(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        pending, self._pending, self._pending_size = self._pending, [], [0, 0]
        responses, self._want_responses = self._want_responses, False
        for batch in self._calls(pending):
            self._in_flight += 1
            self._loop.create_task(self._call(batch, responses))

    def _calls(self, items: list[_Item]) -> list[list[_Item]]:
        """`items` in order, cut into calls of at most max_batch_completions and max_call_bytes
        (a group larger alone goes alone)."""
        calls: list[list[_Item]] = []
        count = size = 0
        for item in items:
            n = len(item.group.completion_json)
            if calls and calls[-1] and (count + n > self.max_batch_completions or size + item.size > self.max_call_bytes):
                calls.append([])
                count = size = 0
            if not calls:
                calls.append([])
            calls[-1].append(item)
            count, size = count + n, size + item.size
        return calls

    async def _call(self, batch: list[_Item], responses: bool) -> None:
        try:
            await self._score_batch(batch, responses)
        finally:
            self._in_flight -= 1
            if self._pending and self._flush is None:  # what waited goes out now
                self._flush = self._loop.call_soon(self._send)

    async def _score_batch(self, batch: list[_Item], responses: bool) -> None:
        """Every future of the batch settles: with its group's answer, or with the error of the
        call or of what follows it (recording), never left waiting."""
        from gym_metrics._transport.client import RemoteCallError

        try:
            try:
                answers = await self._score_retrying([item.group for item in batch], responses)
            except RemoteCallError as exc:
                if not _too_large(exc):
                    raise
                await self._split(batch, responses, exc)
                return
            scored = [Scored(a.rewards, a.failed, a.error_message, a.response_json) for a in answers]
            self._check_shape(batch, scored)
            if self.record_path is not None:
                try:
                    self._record([(item.row, item.step, item.group.completion_json) for item in batch], scored)
                except (OSError, ValueError) as exc:  # the trainer must not get rewards the file lacks
                    raise RewardFailure(f"scored, but recording to {self.record_path} failed: {type(exc).__name__}: {exc}") from exc
        except BaseException as exc:  # every group of the batch gets the error
            for item in batch:
                if not item.future.done():
                    item.future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for item, result in zip(batch, scored):
            if not item.future.done():
                item.future.set_result(result)

    def _check_shape(self, batch: list[_Item], scored: list[Scored]) -> None:
        """RewardFailure unless the answer holds a group per group sent and, in each, a reward,
        flag and message per completion (a group missing left its trainer waiting forever; a
        reward missing shifted the rewards after it onto other completions)."""
        if len(scored) != len(batch):
            raise RewardFailure(f"{self.server} answered {len(scored)} groups for the {len(batch)} sent: no reward can be matched to its completion")
        for g, (item, answer) in enumerate(zip(batch, scored)):
            n = len(item.group.completion_json)
            counts = {len(answer.rewards), len(answer.failed), len(answer.errors)}
            if counts != {n} or len(answer.responses) not in (0, n):
                raise RewardFailure(f"{self.server} answered group {g} of the call with {len(answer.rewards)} rewards for its {n} completions: "
                                    "no reward can be matched to its completion")  # fmt: skip

    async def _split(self, batch: list[_Item], responses: bool, refusal: RemoteCallError) -> None:
        """A call the server refused for its size: its halves sent again (and later calls cut
        at half its size); a group refused alone fails its completions, named, so the caller's
        `on_failure` applies to them and not to the batch."""
        if len(batch) > 1:
            self.max_call_bytes = max(1, min(self.max_call_bytes, sum(item.size for item in batch) // 2))
            half = len(batch) // 2
            await asyncio.gather(self._score_batch(batch[:half], responses), self._score_batch(batch[half:], responses))
            return
        [item] = batch
        n = len(item.group.completion_json)
        why = f"the group's request ({item.size:,} bytes) is over what {self.server} takes (its --max-message-mb): {refusal.details}"
        if not item.future.done():
            item.future.set_result(Scored([0.0] * n, [True] * n, [why] * n, [""] * n))

    async def _score_retrying(self, groups: list[Any], responses: bool) -> Any:
        """ScoreGroups, retried while the server is unavailable (restarting, unreachable):
        a call without sessions is idempotent, so the trainer waits instead of failing. A
        session lost is not retried (its state is gone), nor a call past its deadline (the
        server answers, slower than `timeout_s`: a retry would be as slow, and verify again)."""
        from gym_metrics._transport.client import DeadlineExceededError, ServerUnavailableError, ServerUnreachableError, SessionLostError

        global _GRPC_USED_BY
        _GRPC_USED_BY = os.getpid()
        client = await self._connection()
        for attempt in range(self.max_retries + 1):
            try:
                return await client.score_groups(groups, omit_responses=not responses, timeout=self.timeout_s)
            except SessionLostError:
                raise
            except DeadlineExceededError:
                raise TimeoutError(f"{self.server} did not answer within timeout_s {self.timeout_s:g} s: its verify is slower than that (raise timeout_s)") from None
            except (ServerUnavailableError, ServerUnreachableError):
                if attempt == self.max_retries:
                    raise
                await asyncio.sleep(random.uniform(0, min(5.0, 0.2 * 2**attempt)))
        raise AssertionError("unreachable")

    async def _connection(self) -> Any:
        """The next connection in turn (one per server worker, opened on first use)."""
        if not self._connections:
            from gym_metrics._transport.client import ResourcesClient

            self._client = ResourcesClient(self.server, token=self.token)
            try:
                self._connections = await self._client.open_connections()
            except Exception:  # the server is not up yet: its one connection, retried as any call
                self._connections = [self._client]
        self._turn = (self._turn + 1) % len(self._connections)
        return self._connections[self._turn]

    async def _aclose(self) -> None:
        for connection in {id(c): c for c in [*self._connections, self._client] if c is not None}.values():
            await connection.close()
        self._client, self._connections = None, []

    def _record(self, rows: list[tuple[Any, int | None, Sequence[str]]], scored: list[Scored]) -> None:
        assert self.record_path is not None
        with self._record_lock:
            append_rows(self.record_path, rows, [(g.responses, g.errors) for g in scored])
