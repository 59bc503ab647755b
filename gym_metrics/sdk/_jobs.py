"""What `Evaluator.submit` returns: a `Job` with `name`, `status()`, `wait_until_done()`,
`get_result()` and `cancel()`.

`LocalJob` runs the evaluation in a background thread of this process (its own event loop),
so a script written for durable jobs runs unchanged without a server; it ends with the
process. `RemoteJob` is a job on a `gym-metrics jobs serve` server, which outlives the client.

Both end the same way for the same job: a job whose every row failed is FAILED (as the job
server decides), and its `get_result()` raises JobError carrying the rows (`error.result`).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from gym_metrics.errors import GymMetricsError
from gym_metrics.sdk._result import EvaluationResult

if TYPE_CHECKING:
    from gym_metrics.evaluation import EvaluationScores as Evaluated

FINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED"})


class JobError(GymMetricsError):
    """A job's result was asked for when it has none: not finished, failed or cancelled.
    `result` holds the rows of a job that FAILED because every row did (each with its
    error); None otherwise."""

    def __init__(self, name: str, state: str, error: str | None = None, result: EvaluationResult | None = None) -> None:
        detail = f": {error}" if error else ""
        hint = " (call wait_until_done() first)" if state not in FINAL_STATES else ""
        super().__init__(f"job {name} is {state}{detail}{hint}")
        self.name, self.state, self.error, self.result = name, state, error, result


def every_row_failed(rows: int, failed: int) -> str | None:
    """Why a job whose rows all failed is FAILED (the job server's words); None if it is not."""
    return f"every row failed ({failed} of {rows}); see the row errors" if rows and failed == rows else None


def outcome(evaluated: Evaluated, names: Mapping[str, str] | None) -> tuple[str, EvaluationResult, str | None]:
    """(final state, result, error) of a finished evaluation, as a job server ends it."""
    result = EvaluationResult.from_document(evaluated.to_dict(), names)
    error = every_row_failed(len(evaluated), len(evaluated.errors))
    return ("FAILED" if error else "SUCCEEDED"), result, error


class Job(Protocol):
    """The handle `Evaluator.submit` returns (local or remote)."""

    name: str

    def status(self) -> str: ...
    def wait_until_done(self, timeout: float | None = None) -> str: ...
    def get_result(self) -> EvaluationResult: ...
    def cancel(self) -> str: ...


class LocalJob:
    """An evaluation running in a thread of this process; `cancel()` cancels its asyncio task,
    which stops the rows in flight (the scorer's clients are closed as in any run)."""

    def __init__(self, start: Callable[[], Coroutine[Any, Any, Evaluated]], names: Mapping[str, str] | None) -> None:
        self.name = f"local-{uuid.uuid4().hex[:12]}"
        self._start, self._names = start, names
        self._lock = threading.Lock()
        self._state = "QUEUED"
        self._error: str | None = None
        self._result: EvaluationResult | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancel_requested = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"gym-metrics-{self.name}", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"LocalJob(name={self.name!r}, state={self.status()!r})"

    def _run(self) -> None:
        try:
            state, result, error = outcome(asyncio.run(self._main()), self._names)
            self._finish(state, result=result, error=error)
        except asyncio.CancelledError:
            self._finish("CANCELLED")
        except Exception as exc:  # noqa: BLE001  # the job's error, reported by status / get_result
            self._finish("FAILED", error=f"{type(exc).__name__}: {exc}")

    async def _main(self) -> Evaluated:
        with self._lock:
            if self._cancel_requested:
                raise asyncio.CancelledError
            self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
            self._state = "RUNNING"
        return await self._start()

    def _finish(self, state: str, *, result: EvaluationResult | None = None, error: str | None = None) -> None:
        with self._lock:
            self._state, self._result, self._error = state, result, error
            self._loop = self._task = None
        self._done.set()

    def status(self) -> str:
        """QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED."""
        with self._lock:
            return self._state

    def wait_until_done(self, timeout: float | None = None) -> str:
        """The final state; TimeoutError after `timeout` seconds (the job goes on)."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"job {self.name} not done after {timeout} s (state {self.status()})")
        return self.status()

    def get_result(self) -> EvaluationResult:
        with self._lock:
            if self._result is None or self._state != "SUCCEEDED":
                raise JobError(self.name, self._state, self._error, self._result)
            return self._result

    def cancel(self) -> str:
        """Ask the job to stop; returns the state once it has (at most a few seconds)."""
        with self._lock:
            self._cancel_requested = True
            if self._loop is not None and self._task is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)
        self._done.wait(10)
        return self.status()


class RemoteJob:
    """A job on a job server, through a `gym_metrics._transport.JobClient`."""

    def __init__(self, client: Any, job_id: str, names: Mapping[str, str] | None) -> None:
        self.name = job_id
        self._client, self._names = client, names

    def __repr__(self) -> str:
        return f"RemoteJob(name={self.name!r})"

    def info(self) -> Any:
        """The server's JobInfo: state, rows done / failed / total, rows/s, error."""
        return self._client.get(self.name)

    def status(self) -> str:
        return str(self.info().state)

    def wait_until_done(self, timeout: float | None = None) -> str:
        """The final state, following the server's progress stream; TimeoutError after
        `timeout` seconds (the job goes on on the server)."""
        from gym_metrics._transport.client import JobWaitTimeout

        try:
            for info in self._client.watch(self.name, timeout=timeout):
                if info.final:
                    return str(info.state)
        except JobWaitTimeout:
            raise TimeoutError(f"job {self.name} not done after {timeout} s") from None
        return self.status()  # the stream ended without a final state: ask once

    def get_result(self) -> EvaluationResult:
        info = self.info()
        if info.state != "SUCCEEDED":
            rows = None
            if info.state == "FAILED" and every_row_failed(info.total or 0, info.failed):
                rows = EvaluationResult.from_document(self._client.result(self.name), self._names)
            raise JobError(self.name, str(info.state), info.error, rows)
        return EvaluationResult.from_document(self._client.result(self.name), self._names)

    def cancel(self) -> str:
        """Ask the job to stop; returns the state once it has (at most a few seconds), as
        LocalJob.cancel does (a running job stops within about a second on the server)."""
        state = str(self._client.cancel(self.name).state)
        if state in FINAL_STATES:
            return state
        try:
            return self.wait_until_done(timeout=10)
        except TimeoutError:
            return self.status()


__all__ = ["FINAL_STATES", "Job", "JobError", "LocalJob", "RemoteJob", "every_row_failed", "outcome"]
