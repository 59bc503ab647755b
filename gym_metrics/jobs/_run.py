"""One job's rows, scored in a thread with its own event loop (so CPU-bound scorers never
stall the caller's loop), results committed to the store as they land.

Rows that already have a stored result are skipped: that is what makes a restarted job
resume. A finished row keeps its slot in `parallelism` until its result is committed, so when
a process dies at most `parallelism` rows (in flight or finished but unsaved) are sent to an
endpoint again; rows of a pure-CPU scorer (they send nothing) are committed in batches.

A commit that finds the disk full pauses the job (its rows stay in memory, at most a batch)
and retries with backoff until space is back or the job is cancelled: a full disk is
transient, never a reason to fail a job for good.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, TypeVar

from gym_metrics._util.keys import BoundKey, keys_from
from gym_metrics.evaluation import RowFailure, ScoreMatrix, score_rows
from gym_metrics.errors import GymMetricsError
from gym_metrics.jobs._spec import JobSpec, count_rows, dataset_file, iter_rows
from gym_metrics.jobs._store import JobStore, StoreFullError
from gym_metrics.models import JobState
from gym_metrics.scorers import get_scorer

log = logging.getLogger("gym_metrics.jobs")
T = TypeVar("T")
FULL_RETRY_SECONDS = (0.5, 10.0)
"""First and longest wait between commits while the disk is full (it doubles in between)."""


def full_disk_waits() -> Iterator[float]:
    """Seconds to wait before each retry of a write that found the disk full."""
    delay, longest = FULL_RETRY_SECONDS
    while True:
        yield delay
        delay = min(delay * 2, longest)


@dataclass(frozen=True)
class JobProgress:
    """Where a job is: rows done (failed included) / failed / total, and rows per second."""

    job_id: str
    state: JobState
    done: int
    failed: int
    total: int | None
    rows_per_second: float
    note: str | None = None
    """Why a running job is not moving (e.g. waiting for disk space); None when it is."""


ProgressCallback = Callable[[JobProgress], None]


class JobRun:
    """Runs one job to the end (or until `cancel()`); `run()` blocks its calling thread."""

    def __init__(
        self, store: JobStore, job_id: str, spec: JobSpec, data_root: Path | None, keys: Mapping[str, BoundKey],
        on_progress: ProgressCallback | None = None, flush_seconds: float = 0.1, inline_rows: int | None = None,
    ) -> None:  # fmt: skip
        """`inline_rows`: how many rows the store holds for the job (`JobRecord.inline_rows`);
        None: the rows are in the spec (a file, or a job stored before rows had a table)."""
        self.store, self.job_id, self.spec, self.data_root = store, job_id, spec, data_root
        self.inline_rows = inline_rows
        self.keys, self.on_progress, self.flush_seconds = keys, on_progress, flush_seconds
        self.cancelled = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None

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
        spec = self.spec
        self._same_file()
        total = count_rows(spec, self.data_root) if self.inline_rows is None else self._limited(self.inline_rows)
        self.written(self.store.set_state, self.job_id, JobState.RUNNING, total=total)
        with keys_from(self.keys):
            metric = get_scorer(spec.scorer, spec.scorer_config)
            # Pure-CPU rows (no target, an eager scorer) send nothing anywhere: scoring one
            # again after a crash is harmless, so they are committed in bigger batches.
            sink = StoredRows(self, metric.score_names, hold_slots=spec.target is not None or not metric.eager)
            try:
                await score_rows(
                    metric, self._todo(), sink, parallelism=spec.run.parallelism,
                    target=spec.target, prompt_template=spec.prompt_template,
                )  # fmt: skip
            finally:
                sink.release(report=True)
                await metric.aclose()

    def _same_file(self) -> None:
        """A resumed job's dataset file must be the one it started on (its results are kept by
        row position): one rewritten since would mix two datasets in one result."""
        path = dataset_file(self.spec, self.data_root) if self.inline_rows is None else None
        if path is None:
            return
        stat = os.stat(path)
        now = f"{stat.st_size}:{stat.st_mtime_ns}"
        first = self.written(self.store.source, self.job_id, now)
        if first != now:
            raise GymMetricsError(f"the dataset file {self.spec.dataset.path} changed since the job started (size:mtime {first}, now {now}): "
                                  "its stored results are of the rows it had then; submit the job again")  # fmt: skip

    def _limited(self, n: int) -> int:
        limit = self.spec.run.limit_samples
        return n if limit is None else min(n, limit)

    def _rows(self) -> Iterator[Any]:
        if self.inline_rows is None:
            return iter_rows(self.spec, self.data_root)
        return islice(self.store.rows(self.job_id), self._limited(self.inline_rows))

    def _todo(self) -> Iterator[tuple[int, Any]]:
        """Rows with no stored result; a cancel stops it between rows (a CPU-bound scorer
        may never give the loop a chance to deliver the task's cancellation)."""
        stored = self.store.stored_indices(self.job_id)
        for index, row in enumerate(self._rows()):
            if self.cancelled.is_set():
                raise asyncio.CancelledError
            if index not in stored:
                yield index, row

    def report(self, stored: int, started: float, note: str | None = None) -> None:
        """Progress to `on_progress` (if any): counts from the store, rows/s since `started`."""
        if self.on_progress is None:
            return
        record = self.store.get(self.job_id)
        rate = stored / max(time.monotonic() - started, 1e-9)
        self.on_progress(JobProgress(self.job_id, record.state, record.done, record.failed, record.total, rate, note))

    def written(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(*args)`, a write to the store, waiting out a full disk: paused (logged once,
        reported as the job's note) and retried with backoff; CancelledError if cancelled."""
        waits, paused = full_disk_waits(), False
        while True:
            try:
                result = call(*args, **kwargs)
            except StoreFullError as exc:
                if not paused:
                    paused = True
                    log.warning("job %s paused: %s; retrying until there is space", self.job_id, exc)
                    self.report(0, time.monotonic(), note=f"paused: {exc}; retrying")
                if self.cancelled.wait(next(waits)):
                    raise asyncio.CancelledError from None
                continue
            if paused:
                log.info("job %s resumed: the database is writable again", self.job_id)
            return result


class StoredRows:
    """The RowSink of a job: rows gather in a small batch (formatted by evaluate's own
    ScoreMatrix, so stored entries are exactly `row_scores` entries) and are committed when
    the scoring loop needs their slots back (`hold_slots`), `BATCH_ROWS` have gathered, or
    `flush_seconds` have passed."""

    BATCH_ROWS = 512

    def __init__(self, run: JobRun, names: tuple[str, ...], hold_slots: bool = True) -> None:
        self.run, self.names, self.hold_slots = run, names, hold_slots
        self._batch, self._indices = ScoreMatrix(names), list[int]()
        self._started = self._last = self._reported = time.monotonic()
        self._stored = 0

    @property
    def held(self) -> int:
        return len(self._indices) if self.hold_slots else 0

    def add(self, index: int, scores: Mapping[str, Any] | None, failure: RowFailure | None, generated: Mapping[str, Any] | None = None) -> None:
        self._batch.add(len(self._indices), scores, failure, generated)
        self._indices.append(index)
        if len(self._indices) >= self.BATCH_ROWS or time.monotonic() - self._last >= self.run.flush_seconds:
            self.release()

    def release(self, report: bool = False) -> None:
        """Commit the held rows (one transaction); report progress every `flush_seconds`
        (and when `report`)."""
        now = self._last = time.monotonic()
        run = self.run
        if self._indices:
            entries = self._batch.result("", len(self._indices)).row_scores
            indices, self._batch, self._indices = self._indices, ScoreMatrix(self.names), []
            for entry, index in zip(entries, indices):
                entry["index"] = index
            self._stored += run.written(run.store.add_results, run.job_id, list(zip(indices, entries)))
        if report or now - self._reported >= run.flush_seconds:
            self._reported = now
            run.report(self._stored, self._started)


__all__ = ["JobRun", "JobProgress", "ProgressCallback", "StoredRows"]
