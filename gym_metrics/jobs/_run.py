"""One job's rows, scored in a thread with its own event loop (so CPU-bound scorers never
stall the caller's loop), each row through `evaluate_async`, results committed as they land.

Rows that already have a stored result are skipped: that is what makes a restarted job
resume. Only rows in flight when a process dies can be scored twice (at most `parallelism`,
plus those finished within the last `flush_seconds`).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gym_metrics.evaluation import evaluate_async
from gym_metrics.jobs._spec import JobSpec, iter_rows
from gym_metrics.jobs._store import JobState, JobStore
from gym_metrics.scorers import Scorer, get_scorer


@dataclass(frozen=True)
class Progress:
    """Where a job is: rows done (failed included) / failed / total, and rows per second."""

    job_id: str
    state: JobState
    done: int
    failed: int
    total: int | None
    rows_per_second: float


ProgressCallback = Callable[[Progress], None]


def shared(metric: Scorer) -> Scorer:
    """`metric` behind a scorer whose `aclose` does nothing: one instance (and one pooled
    HTTP client) serves every per-row `evaluate_async`, closed once by the job."""
    attrs = {"name": metric.name, "score_names": metric.score_names, "eager": metric.eager, "score": lambda self, row: metric.score(row)}
    if hasattr(metric, "online_input"):
        attrs["online_input"] = metric.online_input
    return type("SharedScorer", (Scorer,), attrs)(metric.config)


class JobRun:
    """Runs one job to the end (or until `cancel()`); `run()` blocks its calling thread."""

    def __init__(
        self, store: JobStore, job_id: str, spec: JobSpec, data_root: Path | None,
        on_progress: ProgressCallback | None = None, flush_seconds: float = 0.1, flush_rows: int = 256,
    ) -> None:  # fmt: skip
        self.store, self.job_id, self.spec, self.data_root = store, job_id, spec, data_root
        self.on_progress = on_progress
        self.flush_seconds, self.flush_rows = flush_seconds, flush_rows
        self.cancelled = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._buffer: list[tuple[int, Mapping[str, Any]]] = []
        self._last_flush = time.monotonic()
        self._started = time.monotonic()
        self._scored = 0

    def cancel(self) -> None:
        """Stop soon: in-flight rows are cancelled, finished ones are already stored."""
        self.cancelled.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop already closed: the job is over
                pass

    def run(self) -> bool:
        """Score every row without a result: True when done, False when cancelled (the
        caller stores the final state)."""
        try:
            asyncio.run(self._main())
        except asyncio.CancelledError:
            return False
        return True

    async def _main(self) -> None:
        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        if self.cancelled.is_set():
            raise asyncio.CancelledError
        total = sum(1 for _ in iter_rows(self.spec, self.data_root))
        self.store.set_state(self.job_id, JobState.RUNNING, total=total)
        metric = get_scorer(self.spec.scorer, self.spec.scorer_config)
        try:
            await self._score(shared(metric), self._todo())
        finally:
            self._flush()
            await metric.aclose()

    def _todo(self) -> Iterator[tuple[int, Any]]:
        stored = self.store.stored_indices(self.job_id)
        for index, row in enumerate(iter_rows(self.spec, self.data_root)):
            if index not in stored:
                yield index, row

    async def _score(self, metric: Scorer, rows: Iterator[tuple[int, Any]]) -> None:
        pending: set[asyncio.Task[None]] = set()
        try:
            for index, row in rows:
                if len(pending) >= self.spec.run.parallelism:
                    pending = await self._settle(pending)
                pending.add(asyncio.create_task(self._one(metric, index, row)))
            while pending:
                pending = await self._settle(pending)
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _settle(self, pending: set[asyncio.Task[None]]) -> set[asyncio.Task[None]]:
        """Wait for a row to finish; store what finished; an error outside any row (a bad
        target config) ends the job."""
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        self._maybe_flush()
        for task in done:
            task.result()
        return pending

    async def _one(self, metric: Scorer, index: int, row: Any) -> None:
        spec = self.spec
        result = await evaluate_async(metric, [row], parallelism=1, target=spec.target, prompt_template=spec.prompt_template)
        entry = result.row_scores[0]
        entry["index"] = index
        self._buffer.append((index, entry))
        self._scored += 1

    def _maybe_flush(self) -> None:
        if len(self._buffer) >= self.flush_rows or time.monotonic() - self._last_flush >= self.flush_seconds:
            self._flush()

    def _flush(self) -> None:
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self.store.add_results(self.job_id, batch)
        self._last_flush = time.monotonic()
        if self.on_progress is not None:
            record = self.store.get(self.job_id)
            rate = self._scored / max(time.monotonic() - self._started, 1e-9)
            self.on_progress(Progress(self.job_id, record.state, record.done, record.failed, record.total, rate))


__all__ = ["JobRun", "Progress", "ProgressCallback"]
