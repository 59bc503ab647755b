"""Runs queued jobs, a bounded number at once, each in a thread of its own; after a restart
it picks up every job that was RUNNING or QUEUED where its stored rows end."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from gym_metrics._util.exclusive import Exclusive, hold_exclusive
from gym_metrics._util.keys import keys_from, read_key
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError
from gym_metrics.jobs._run import JobRun, JobProgress, ProgressCallback, full_disk_waits
from gym_metrics.jobs._secrets import SecretStore
from gym_metrics.jobs._spec import JobSpec, dataset_file, parse_spec
from gym_metrics.jobs._store import JobRecord, JobStore, StoreFullError, request_digest
from gym_metrics.models import JobState
from gym_metrics.scorers import get_scorer
from gym_metrics.evaluation import online_parts

log = logging.getLogger("gym_metrics.jobs")
T = TypeVar("T")
DEFAULT_MAX_PARALLELISM = 128
"""The largest `run.parallelism` a job may ask for unless the operator says otherwise: each row
in flight holds memory and a connection, so a submitter must not choose without bound."""


class JobExecutor:
    """`await executor.start()`, then `submit(spec)` / `cancel(id)` / `await wait(id)`;
    `await executor.aclose()` stops running jobs and leaves them to resume next start."""

    def __init__(
        self, store: JobStore, *, max_jobs: int = 2, data_root: str | os.PathLike[str] | None = None,
        secrets: SecretStore | None = None, on_progress: ProgressCallback | None = None,
        flush_seconds: float = 0.1, max_parallelism: int = DEFAULT_MAX_PARALLELISM,
    ) -> None:  # fmt: skip
        if max_jobs < 1 or max_parallelism < 1:
            raise InvalidInputError(f"max_jobs and max_parallelism must be >= 1, got {max_jobs} and {max_parallelism}")
        self.store, self.max_jobs, self.max_parallelism = store, max_jobs, max_parallelism
        self.data_root = None if data_root is None else Path(data_root)
        self.secrets = secrets or SecretStore()
        self.on_progress, self.flush_seconds = on_progress, flush_seconds
        self._runs: dict[str, JobRun] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._dispatcher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing = False
        self._owner: Exclusive | None = None
        self._cancelled: set[str] = set()
        """Jobs a user cancelled while they ran: CANCELLED at their end, even when the executor
        is closing (its own stops go back to QUEUED)."""

    async def start(self) -> None:
        """Take the database (one executor at a time: another live one would run its jobs
        twice), requeue jobs a dead process left RUNNING, then start dispatching."""
        self._owner = hold_exclusive(
            Path(os.path.realpath(self.store.path) + ".owner"),  # the file's own path: a symlink to it is the same database
            f"another job server runs the jobs of {self.store.path}: stop it first, or give this one another --db",
        )
        requeued = await self._stored(self.store.requeue_running)
        if requeued:
            log.info("resuming %d job(s) left running: %s", len(requeued), ", ".join(requeued))
        self._loop = asyncio.get_running_loop()
        self._dispatcher = asyncio.create_task(self._dispatch())
        self._wake.set()

    async def _stored(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`call(*args)` on the store in a thread (never on the event loop), waiting out a full
        disk (logged once) until it succeeds or the executor closes."""
        waits, warned = full_disk_waits(), False
        while True:
            try:
                return await asyncio.to_thread(call, *args, **kwargs)
            except StoreFullError as exc:
                if self._closing:
                    raise
                if not warned:
                    warned = True
                    log.warning("%s; retrying until there is space", exc)
                await asyncio.sleep(next(waits))

    def submit(self, spec: JobSpec | Mapping[str, Any], wanted: Callable[[], bool] | None = None, request_id: str = "") -> JobRecord:
        """Validate (scorer, config, target, template, data root, secrets) and queue; errors
        name the field. `wanted()` false after the checks (the submitting client went away) and
        nothing is stored: a client that retries would run the dataset twice. A job that says
        no `run.parallelism` gets the default within this server's ceiling. `request_id`: a
        submission sent again is answered the job it stored (JobStore.create), before any check:
        the files and settings it was checked against may have changed since."""
        spec = parse_spec(spec)
        digest = request_digest(spec) if request_id else ""  # as sent: before this server's defaults
        record = self.store.requested(request_id, digest) if request_id else None
        if record is None:
            if "parallelism" not in spec.run.model_fields_set:
                spec.run.parallelism = min(spec.run.parallelism, self.max_parallelism)
            self.validate(spec)
            if wanted is not None and not wanted():
                raise GymMetricsError("the client went away before its job was stored: not queued")
            record, new = self.store.create_once(spec, request_id, digest)
            if new:
                log.info("job %s queued (scorer %s)", record.id, spec.scorer)
                self._notify()
                return record
        log.info("job %s submitted again (request_id %s): answered as stored", record.id, request_id)
        return record

    def _notify(self) -> None:
        """Wake the dispatcher, from its loop or from any thread (a servicer's worker)."""
        loop = self._loop
        try:
            same = loop is None or asyncio.get_running_loop() is loop
        except RuntimeError:
            same = False
        if same:
            self._wake.set()
        elif loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._wake.set)

    def validate(self, spec: JobSpec) -> None:
        """What can be known before running: InvalidInputError naming the field."""
        if spec.run.parallelism > self.max_parallelism:
            why = f"{spec.run.parallelism} is over this server's ceiling of {self.max_parallelism}"
            raise InvalidInputError("invalid job spec", [FieldViolation("run.parallelism", why)])
        dataset_file(spec, self.data_root)
        with keys_from(self.secrets.resolve(spec.secret_names())):
            get_scorer(spec.scorer, spec.scorer_config)  # reads nothing remote: no session opened yet
            if spec.target is not None:
                self._check_target(spec)

    def _check_target(self, spec: JobSpec) -> None:
        """The target and template as the run will take them, its key allowed to its URL, and
        its requests in flight within the ceiling (the run keeps as many rows in flight)."""
        assert spec.target is not None
        config, _ = online_parts(spec.target, spec.prompt_template)
        read_key(config.api_key_env, "target", config.url, at="target")
        if config.max_concurrency > self.max_parallelism:
            why = f"{config.max_concurrency} is over this server's ceiling of {self.max_parallelism} requests in flight"
            raise InvalidInputError("invalid job spec", [FieldViolation("target.max_concurrency", why)])

    def cancel(self, job_id: str) -> JobRecord:
        """Cancel a queued or running job (a running one stops within about a second)."""
        record = self.store.get(job_id)
        if record.state.final or self.store.cancel_if_queued(job_id):
            return self.store.get(job_id)
        run = self._runs.get(job_id)
        if run is not None:
            self._cancelled.add(job_id)
            run.cancel()
        return self.store.get(job_id)

    async def wait(self, job_id: str, timeout: float | None = None, poll: float = 0.05) -> JobRecord:
        """The job once it is in a final state (TimeoutError after `timeout` seconds)."""
        async def final() -> JobRecord:
            while not (record := await asyncio.to_thread(self.store.get, job_id)).state.final:
                await asyncio.sleep(poll)
            return record

        return await asyncio.wait_for(final(), timeout)

    async def aclose(self) -> None:
        """Stop dispatching; running jobs stop and go back to QUEUED (they resume on the next start)."""
        self._closing = True
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            await asyncio.gather(self._dispatcher, return_exceptions=True)
        for run in list(self._runs.values()):
            run.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._owner is not None:
            self._owner.close()
            self._owner = None

    async def _dispatch(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            queued = await self._stored(self.store.list_jobs, JobState.QUEUED, limit=self.max_jobs + len(self._runs))
            for record in queued:
                if len(self._runs) >= self.max_jobs:
                    break
                if record.id not in self._runs:
                    await self._launch(record)

    async def _launch(self, record: JobRecord) -> None:
        try:
            keys = self.secrets.resolve(record.spec.secret_names())
        except InvalidInputError as exc:  # a secret removed since the job was queued
            await self._stored(self.store.set_state, record.id, JobState.FAILED, error=str(exc))
            self._wake.set()  # its slot stays free: the jobs queued behind it are listed again
            return
        run = JobRun(
            self.store, record.id, record.spec, self.data_root, keys, self._progress, self.flush_seconds, record.inline_rows
        )  # fmt: skip
        self._runs[record.id] = run
        task = asyncio.create_task(self._drive(run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drive(self, run: JobRun) -> None:
        """Run the job in its thread; store how it ended; make room for the next."""
        job_id = run.job_id
        try:
            try:
                if not await self._stored(self.store.start_if_queued, job_id):
                    log.info("job %s was cancelled before it started", job_id)
                    return
                log.info("job %s running", job_id)
                finished = await asyncio.to_thread(run.run)
            except Exception as exc:
                await self._stored(self._ended, run, exc)
            else:
                await self._stored(self._ended, run, None if finished else asyncio.CancelledError())
        except StoreFullError:  # closing with the disk full: the job stays RUNNING, requeued on the next start
            log.warning("job %s: its final state could not be stored (disk full); it resumes on the next start", job_id)
        finally:
            del self._runs[job_id]
            self._cancelled.discard(job_id)
            self._wake.set()

    def _ended(self, run: JobRun, exc: BaseException | None) -> None:
        """Store how the job ended (in a thread: it writes) and report it."""
        job_id = run.job_id
        if isinstance(exc, asyncio.CancelledError) or run.cancelled.is_set():
            state = JobState.QUEUED if self._closing and job_id not in self._cancelled else JobState.CANCELLED
            self.store.set_state(job_id, state)
        elif exc is not None:
            message = str(exc) if isinstance(exc, GymMetricsError) else f"{type(exc).__name__}: {exc}"
            self.store.set_state(job_id, JobState.FAILED, error=message)
        else:
            record = self.store.get(job_id)
            all_bad = bool(record.total) and record.failed == record.total
            error = f"every row failed ({record.failed} of {record.total}); see the row errors" if all_bad else None
            self.store.set_state(job_id, JobState.FAILED if all_bad else JobState.SUCCEEDED, error=error)
        record = self.store.get(job_id)
        log.info("job %s %s (%d rows, %d failed)", job_id, record.state.value, record.done, record.failed)
        self._progress(JobProgress(job_id, record.state, record.done, record.failed, record.total, 0.0))

    def _progress(self, progress: JobProgress) -> None:
        if self.on_progress is not None:
            try:
                self.on_progress(progress)
            except Exception:  # a watcher's bug never stops a job
                log.exception("progress callback failed for job %s", progress.job_id)


__all__ = ["JobExecutor"]
