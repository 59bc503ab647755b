"""The reward client every trainer adaptor shares: one pooled gRPC channel per process and
server, concurrent calls batched into one ScoreGroups call, usable from synchronous code and
from any event loop.

The channel lives on a background thread's event loop (a trainer's own loop, or none, never
owns it), with one connection per server worker (`serve --workers N`), used in turn. Batching
is Nagle's: while fewer than two calls per connection are in flight, what was submitted goes
out at once (groups submitted together, as TRL's async reward functions of one step, share a
call); past that, groups wait for a call to finish and then go out together (verl's per-sample
calls from a thread pool), at most `max_batch_completions` completions a call. Each group's answer carries its rewards with a failed flag
beside each; what a failure becomes is the adaptor's choice (`on_failure`). A server that is
restarting or unreachable is retried (`max_retries`, backoff with jitter): the trainer waits
and loses nothing. With `record`, the scored completions are written (and synced) before the
trainer gets their rewards, so a killed trainer's file holds every reward it was told of.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

Groups = Sequence[tuple[Any, Sequence[Any]]]
"""(task row: a dict or JSON text, completions: each a text or a Responses object) per group."""
_Item = tuple[Any, Sequence[Any], "Future[Scored]", "int | None"]

_CLIENTS: dict[tuple[int, str, str | None], RewardClient] = {}
_CLIENTS_LOCK = threading.Lock()


@dataclass(frozen=True)
class Scored:
    """One group's answer: position i for completion i."""

    rewards: list[float]
    failed: list[bool]
    errors: list[str]
    responses: list[str]
    """The verify responses as JSON text ("" where failed, or when not asked for)."""


class RewardFailure(RuntimeError):
    """A completion could not be scored (`on_failure="raise"`): the message says which and why."""


def reward_client(server: str, *, token: str | None = None) -> RewardClient:
    """The process's client of `server` (HOST:PORT), made on first use."""
    key = (os.getpid(), server, token)  # a forked trainer worker gets a client of its own
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = RewardClient(server, token=token)
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
        if self.record_path is not None:
            _cut_partial_line(self.record_path)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"gym-metrics rewards {server}", daemon=True)
        self._thread.start()
        self._pending: list[_Item] = []
        self._flush: asyncio.Handle | None = None
        self._client: Any = None
        self._connections: list[Any] = []
        self._turn = 0
        self._in_flight = 0
        self._want_responses = False
        self._groups = _line_count(self.record_path) if self.record_path is not None else 0
        """The next recorded group's task index (a restarted trainer's continue after the file's)."""
        self._record_lock = threading.Lock()

    # ----------------------------------------------------------------- public

    def score(self, groups: Groups, *, responses: bool = False, step: int | None = None) -> list[Scored]:
        """Score `(task row, completions)` groups, blocking (from synchronous code). `step`
        (the trainer's step) names the recorded rows' agent (`step_<n>`)."""
        futures = self.submit(groups, responses=responses, step=step)
        try:
            return [f.result(timeout=self.timeout_s + 5) for f in futures]
        except FutureTimeout:
            raise TimeoutError(f"no rewards from {self.server} within {self.timeout_s + 5:g} s (timeout_s {self.timeout_s:g})") from None

    async def score_async(self, groups: Groups, *, responses: bool = False, step: int | None = None) -> list[Scored]:
        """Score groups from any event loop (the caller's loop waits, it never runs the call)."""
        futures = self.submit(groups, responses=responses, step=step)
        return list(await asyncio.gather(*(asyncio.wrap_future(f) for f in futures)))

    def submit(self, groups: Groups, *, responses: bool = False, step: int | None = None) -> list[Future[Scored]]:
        """Queue groups for the next batched call; a future per group."""
        futures: list[Future[Scored]] = [Future() for _ in groups]
        items: list[_Item] = [(row, list(completions), future, step) for (row, completions), future in zip(groups, futures)]
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
        if sum(len(item[1]) for item in self._pending) >= self.max_batch_completions:
            self._send()
        elif self._flush is None and self._in_flight < 2 * max(1, len(self._connections)):
            self._flush = self._loop.call_soon(self._send)  # what this loop turn brings goes along

    def _send(self) -> None:
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        batch, self._pending = self._pending, []
        responses, self._want_responses = self._want_responses, False
        if batch:
            self._in_flight += 1
            self._loop.create_task(self._call(batch, responses))

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
        try:
            answers = await self._score_retrying([(row, completions) for row, completions, _, _ in batch], responses)
            scored = [Scored(a.rewards, a.failed, a.error_message, a.response_json) for a in answers]
            if self.record_path is not None:
                try:
                    self._record([(row, step) for row, _, _, step in batch], scored)
                except (OSError, ValueError) as exc:  # the trainer must not get rewards the file lacks
                    raise RewardFailure(f"scored, but recording to {self.record_path} failed: {type(exc).__name__}: {exc}") from exc
        except BaseException as exc:  # every group of the batch gets the error
            for _, _, future, _ in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, _, future, _), result in zip(batch, scored):
            if not future.done():
                future.set_result(result)

    async def _score_retrying(self, groups: list[tuple[Any, Sequence[Any]]], responses: bool) -> Any:
        """ScoreGroups, retried while the server is unavailable (restarting, unreachable):
        a call without sessions is idempotent, so the trainer waits instead of failing. A
        session lost is not retried (its state is gone)."""
        from gym_metrics._transport.client import ServerUnavailableError, ServerUnreachableError, SessionLostError

        client = await self._connection()
        for attempt in range(self.max_retries + 1):
            try:
                return await client.score_groups(groups, omit_responses=not responses, timeout=self.timeout_s)
            except SessionLostError:
                raise
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

    def _record(self, rows: list[tuple[Any, int | None]], scored: list[Scored]) -> None:
        """Append every scored completion as a rollout row (agent `step_<n>`, or `train` when
        the step is not known; a task per group), so `gym-metrics aggregate` gives the
        training-time metrics with the numbers of any other run."""
        assert self.record_path is not None
        lines = []
        for (row, step), group in zip(rows, scored):
            task = self._groups
            self._groups += 1
            base = row if isinstance(row, Mapping) else orjson.loads(row)
            agent = {"name": "train" if step is None else f"step_{step}"}
            for i, (text, error) in enumerate(zip(group.responses, group.errors)):
                entry = orjson.loads(text) if text else {**base, "_gm_error": {"kind": "verify_failed", "message": error}}
                lines.append(orjson.dumps({**entry, "agent_ref": agent, "_ng_task_index": task, "_ng_rollout_index": i}) + b"\n")
        with self._record_lock, self.record_path.open("ab") as f:  # one write: whole lines or a cut last one
            f.write(b"".join(lines))
            f.flush()
            os.fsync(f.fileno())


def _cut_partial_line(path: Path) -> None:
    """Cut a last line a killed trainer left half-written (every row the trainer was told of is
    whole: rows are written before their rewards are handed back)."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    with path.open("rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return
        f.truncate(data.rfind(b"\n") + 1)


def _line_count(path: Path) -> int:
    """Lines in `path` (0 when absent): a bound on the task indices it holds."""
    if not path.is_file():
        return 0
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
