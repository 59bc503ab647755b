"""Serving one environment, with no transport: what each ResourcesService call does once its
messages are converted (Flower's servicer -> handler shape).

- verify: one rollout; an exception from the environment's own code is labelled as such.
- verify_batch: a batch of rollouts at bounded concurrency, each with its time budget; every
  failure is that rollout's result (kind and message), never the call's.
- aggregation: one agent's rows within the call's limits, finished in a thread that stops when
  the caller goes away.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

from gym_metrics._util.aio import Busy
from gym_metrics._util.cancellable import run_cancellable
from gym_metrics._util.eager import start_eagerly
from gym_metrics._util.limits import CallLimits, exceeded
from gym_metrics.aggregate import AgentAggregate, AggregateOptions, Aggregator
from gym_metrics.environments._session_calls import TOOL_TIMEOUT_S, Sessions
from gym_metrics.environments._server import SimpleResourcesServer
from gym_metrics.environments._sessions import IDLE_TTL_S, MAX_SESSIONS, SessionStore
from gym_metrics.errors import GymMetricsError, InvalidInputError, UserCodeError, code_failed
from gym_metrics.rollouts import RolloutColumns

log = logging.getLogger("gym_metrics.transport")

STARTED_PER_BATCH = 1024
"""Rollouts of one batch started and not yet done, at most (each a Task of about 2 KB while it
waits for a slot): more than a collector's batch (256), so an ordinary batch starts whole."""

INVALID_REQUEST, TIMEOUT, VERIFY_FAILED = "invalid_request", "timeout", "verify_failed"
"""Why a rollout's verify failed (the wire's VerifyErrorKind, by name)."""

Parts = TypeVar("Parts")
WriteResult = Callable[[int, float, str, "str | None", str], None]
"""(item, reward, response_json, failure kind or None, failure message): one rollout's result."""


class Recorder(Protocol):
    """What a server counts (its Prometheus metrics); every method is called on the loop."""

    def rollouts(self, verified: int, failed: Mapping[str, int] | None = None) -> None: ...

    def queued(self, rollouts: int) -> None: ...

    def aggregating(self, change: int) -> None: ...


class VerifyTimeout(asyncio.TimeoutError):
    """A verify past `verify_timeout_s` (its message says so; a TIMEOUT failure on its rollout)."""


class EnvironmentHandler:
    """The calls of one served environment; see the module docstring. `recorder` None counts nothing."""

    def __init__(
        self,
        env: SimpleResourcesServer,
        *,
        max_concurrent_verifies: int = 64,
        verify_timeout_s: float | None = None,
        max_sessions: int = MAX_SESSIONS,
        session_ttl_s: float = IDLE_TTL_S,
        tool_timeout_s: float = TOOL_TIMEOUT_S,
        limits: CallLimits | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.env = env
        self.sessions = Sessions(env, SessionStore(max_sessions, session_ttl_s), tool_timeout_s)
        """Sessions and tool calls (SeedSession, CallTool, CloseSession, Verify in a session)."""
        self.limits = limits or CallLimits()
        self._max_concurrent = max_concurrent_verifies
        self._timeout = verify_timeout_s
        self._recorder = recorder
        self._aggregations = 0
        self.verify_failures = 0
        """Verifies of a batch whose environment code raised, since the server started."""

    # ----------------------------------------------------------------- verify

    async def verify(self, body_json: Mapping[str, Any] | str | bytes, session_id: str = "") -> tuple[float, str]:
        """One rollout's reward and response JSON (in its session, which it closes, when one
        is named) within verify_timeout_s; its failure is the call's."""
        if self._recorder is None:
            return await self._bounded(self._verify(body_json, session_id))
        try:
            answer = await self._bounded(self._verify(body_json, session_id))
        except Exception as exc:
            self._recorder.rollouts(0, {INVALID_REQUEST if isinstance(exc, InvalidInputError) else VERIFY_FAILED: 1})
            raise
        self._recorder.rollouts(1)
        return answer

    async def _verify(self, body_json: Mapping[str, Any] | str | bytes, session_id: str = "") -> tuple[float, str]:
        try:
            if session_id:
                return await self.sessions.verify(session_id, body_json)
            return await self.env.verify_json(body_json)
        except GymMetricsError:
            raise
        except BaseException as exc:
            if code_failed(exc):
                raise UserCodeError("verify", exc) from exc
            raise

    async def _bounded(self, call: Coroutine[Any, Any, tuple[float, str]]) -> tuple[float, str]:
        """`call` within verify_timeout_s, VerifyTimeout past it. A verify that blocks the event
        loop (synchronous code) cannot be stopped at the bound: returned past it, it fails all
        the same (it was scored as if in time) and is logged, as it held up the whole server."""
        if not self._timeout:
            return await call
        running = Busy(call)
        try:
            answer = await asyncio.wait_for(running, self._timeout)
        except asyncio.TimeoutError:
            raise VerifyTimeout(f"verify exceeded {self._timeout} s") from None
        if running.seconds > self._timeout:
            message = (f"verify exceeded {self._timeout} s: it ran {running.seconds:.1f} s without yielding, the whole server stopped "
                       "meanwhile (synchronous work in an async verify: run it with asyncio.to_thread)")  # fmt: skip
            log.warning(message)
            raise VerifyTimeout(message)
        return answer

    def slots(self) -> asyncio.Semaphore:
        """The verifies one stream may run at once (shared by its batches)."""
        return asyncio.Semaphore(self._max_concurrent)

    async def verify_batch(
        self, bodies: Sequence[Mapping[str, Any] | str | bytes], write: WriteResult, slots: asyncio.Semaphore, key: Callable[[int], tuple[int, int]]
    ) -> None:
        """Every rollout's result through `write`; `key(item)` is its (task, rollout), for the log.
        Rollouts start eagerly: one whose verify never suspends costs no Task; the others run
        concurrently within `slots`, at most STARTED_PER_BATCH of a batch started and not done
        (a batch of 100,000 rollouts was 100,000 Tasks waiting at once: 2 KB each). The slot is
        taken inside the item, not before starting it: a Task started before 3.12 runs on a
        later turn of the loop, so a slot taken for it first let only `slots` of a batch start
        per turn, and its answers went out in that many pieces (a copy of each result)."""
        recorder = self._recorder
        if recorder is not None:
            recorder.queued(len(bodies))
        kinds: Counter[str] = Counter()
        try:
            trusted = self.env.eager_verify
            running: set[asyncio.Future[None]] = set()  # (only those not done: a long batch keeps no finished Task)
            failed: list[BaseException] = []

            def ended(future: asyncio.Future[None]) -> None:
                running.discard(future)
                if not future.cancelled() and future.exception() is not None:
                    failed.append(future.exception())  # type: ignore[arg-type]

            try:
                for item, body in enumerate(bodies):
                    while len(running) >= STARTED_PER_BATCH:
                        await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    done, value = start_eagerly(self._verify_item(item, body, write, slots, kinds, key), trusted=trusted)
                    if not done:
                        running.add(value)  # type: ignore[arg-type]
                        value.add_done_callback(ended)  # type: ignore[union-attr]
                while running:
                    await asyncio.wait(running)  # (each one's `ended` runs before the wait returns)
                if failed:
                    raise failed[0]
            except BaseException:  # cancelled (its client went away): no rollout of the batch goes on
                for future in running:
                    future.cancel()
                raise
        finally:
            if recorder is not None:
                recorder.queued(-len(bodies))
        if recorder is not None:
            recorder.rollouts(len(bodies) - sum(kinds.values()), kinds)

    async def _verify_item(
        self, item: int, body: Mapping[str, Any] | str | bytes, write: WriteResult, slots: asyncio.Semaphore, kinds: Counter[str],
        key: Callable[[int], tuple[int, int]],
    ) -> None:  # fmt: skip
        async with slots:
            try:
                reward, response_json = await self._bounded(self._verify(body))
            except InvalidInputError as exc:
                kinds[INVALID_REQUEST] += 1
                write(item, 0.0, "", INVALID_REQUEST, str(exc))
            except asyncio.TimeoutError as exc:
                kinds[TIMEOUT] += 1
                write(item, 0.0, "", TIMEOUT, str(exc))
            except Exception as exc:
                self._logged_failure(key(item), exc)
                kinds[VERIFY_FAILED] += 1
                write(item, 0.0, "", VERIFY_FAILED, str(exc))
            else:
                write(item, reward, response_json, None, "")

    def _logged_failure(self, where: tuple[int, int], exc: Exception) -> None:
        """The first three failed verifies with their traceback, then a line at the 10th, 100th,
        ... (each row's error is in its answer): a run of thousands failing was thousands of
        25-line tracebacks."""
        self.verify_failures += 1
        n = self.verify_failures
        if n <= 3:
            log.warning("verify failed for task %d rollout %d", *where, exc_info=exc)
        elif n >= 10 and str(n).strip("0") == "1":
            log.warning("%d verifies failed so far (each answered with its error); the last: task %d rollout %d: %s: %s", n, *where, type(exc).__name__, exc)

    # ----------------------------------------------------------------- aggregate

    @asynccontextmanager
    async def aggregation(self, agent: str, options: AggregateOptions, header_bytes: int) -> AsyncIterator[Aggregation]:
        """One agent's aggregation call, refused up front past the limits on tasks and on
        aggregations running at once."""
        limits, expected = self.limits, len(options.expected_task_indices or ())
        if expected > limits.max_tasks_per_call:
            raise exceeded("max_tasks_per_call", limits.max_tasks_per_call, f"the header expects {expected:,} tasks")
        if self._aggregations >= limits.max_concurrent_aggregations:
            raise exceeded("max_concurrent_aggregations", limits.max_concurrent_aggregations,
                           f"{self._aggregations} aggregations are running; retry later", retry_after_s=1.0)  # fmt: skip
        self._aggregations += 1
        if self._recorder is not None:
            self._recorder.aggregating(1)
        try:
            yield Aggregation(self.env, self.env.new_aggregator(agent, options), limits, header_bytes, options.expected_task_indices or ())
        finally:
            self._aggregations -= 1
            if self._recorder is not None:
                self._recorder.aggregating(-1)


class Aggregation:
    """One aggregation call's rows, counted against its limits as they arrive."""

    def __init__(
        self, env: SimpleResourcesServer, aggregator: Aggregator, limits: CallLimits, header_bytes: int, expected: Sequence[int]
    ) -> None:
        self._env, self._aggregator, self._limits = env, aggregator, limits
        self._bytes, self._expected = header_bytes, expected
        self._seen: set[str] = set()
        self.duplicates = self._batches = self._rows = 0

    def received(self, message_bytes: int) -> None:
        """Count a message's size against `max_call_mb`."""
        self._bytes += message_bytes
        if self._bytes > self._limits.max_call_bytes:
            raise exceeded("max_call_mb", self._limits.max_call_mb, f"the call sent {self._bytes / (1 << 20):,.1f} MiB")

    def batch(self, batch_id: str, rows: int) -> tuple[int, int] | None:
        """The batch's number and its first row's number in the call (rows in errors are
        numbered across the stream); None for a batch id already received (a resend)."""
        if rows > self._limits.max_rows_per_batch:
            raise exceeded("max_rows_per_batch", self._limits.max_rows_per_batch, f"batch {batch_id!r} carries {rows:,} rollouts: send smaller batches")
        number, offset = self._batches, self._rows
        self._batches += 1
        self._rows += rows
        if self._rows > self._limits.max_rollouts_per_call:
            raise exceeded("max_rollouts_per_call", self._limits.max_rollouts_per_call, f"the call sent {self._rows:,} rollouts")
        if batch_id:
            if batch_id in self._seen:
                self.duplicates += 1
                return None
            self._seen.add(batch_id)
        return number, offset

    def add(self, columns: RolloutColumns) -> None:
        self._aggregator.add(columns)

    async def finish(self, render: Callable[[AgentAggregate, int, int], Parts]) -> Parts:
        """The agent's metrics through `render(result, received rollouts, duplicate batches)`,
        in a thread that stops when the caller is cancelled."""
        aggregator, limits = self._aggregator, self._limits

        def work() -> Parts:
            if aggregator.received_rollouts + len(self._expected) > limits.max_tasks_per_call:  # else it cannot be
                tasks = aggregator.task_count(self._expected)
                if tasks > limits.max_tasks_per_call:
                    raise exceeded("max_tasks_per_call", limits.max_tasks_per_call, f"the call names {tasks:,} tasks")
            return render(self._env.finalize(aggregator), aggregator.received_rollouts, self.duplicates)

        return await run_cancellable(work, name="gym-metrics-aggregate")


__all__ = ["INVALID_REQUEST", "TIMEOUT", "VERIFY_FAILED", "Aggregation", "EnvironmentHandler", "Recorder"]
