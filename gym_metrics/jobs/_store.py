"""The durable half of jobs: one SQLite file (WAL) holding each job, its spec and one result
per row, so a job outlives the process that runs it and resumes where it stopped."""

from __future__ import annotations

import enum
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import orjson

from gym_metrics.errors import NotFoundError
from gym_metrics.jobs._spec import JobSpec

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    spec TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    total INTEGER,
    error TEXT
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, created);
CREATE TABLE IF NOT EXISTS row_results (
    job_id TEXT NOT NULL REFERENCES jobs (id),
    row_index INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (job_id, row_index)
) WITHOUT ROWID;
"""


class JobState(str, enum.Enum):
    """A job's life: QUEUED -> RUNNING -> one of the three final states."""

    QUEUED = "QUEUED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def final(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class JobRecord:
    """A job as stored: what it is, where it is, how far it got."""

    id: str
    state: JobState
    spec_json: str = field(repr=False)
    """The spec as stored (parsed on demand by `spec`: a spec with inline rows can be large)."""
    created: float
    updated: float
    done: int
    failed: int
    total: int | None
    error: str | None

    @cached_property
    def spec(self) -> JobSpec:
        return JobSpec.model_validate_json(self.spec_json)


class JobStore:
    """Jobs and row results in one SQLite file. Thread-safe (one connection behind a lock):
    the executor's job threads write rows while the caller reads."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash loses no committed row
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def create(self, spec: JobSpec) -> JobRecord:
        """Store a new QUEUED job; the spec holds secret names only, never values."""
        job_id, now = uuid.uuid4().hex, time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO jobs (id, state, spec, created, updated) VALUES (?, ?, ?, ?, ?)",
                (job_id, JobState.QUEUED.value, spec.model_dump_json(), now, now),
            )
        return self.get(job_id)

    def get(self, job_id: str) -> JobRecord:
        with self._lock:
            row = self._db.execute("SELECT * FROM jobs WHERE id = ?", (job_id,)).fetchone()
        if row is None:
            raise NotFoundError(f"no job {job_id!r}")
        return _record(row)

    def list_jobs(self, state: JobState | None = None, *, limit: int = 100, after: str | None = None) -> list[JobRecord]:
        """Jobs oldest first, at most `limit`, those after job id `after` (the page token)."""
        where, args = ["1 = 1"], []
        if state is not None:
            where.append("state = ?")
            args.append(state.value)
        if after is not None:
            where.append("(created, id) > (SELECT created, id FROM jobs WHERE id = ?)")
            args.append(after)
        sql = f"SELECT * FROM jobs WHERE {' AND '.join(where)} ORDER BY created, id LIMIT ?"
        with self._lock:
            rows = self._db.execute(sql, (*args, max(1, limit))).fetchall()
        return [_record(r) for r in rows]

    def set_state(self, job_id: str, state: JobState, *, error: str | None = None, total: int | None = None) -> JobRecord:
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET state = ?, error = coalesce(?, error), total = coalesce(?, total), updated = ? WHERE id = ?",
                (state.value, error, total, time.time(), job_id),
            )
        return self.get(job_id)

    def cancel_if_queued(self, job_id: str) -> bool:
        """CANCELLED now when still QUEUED (nothing runs it yet); False otherwise."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state = ?, updated = ? WHERE id = ? AND state = ?",
                (JobState.CANCELLED.value, time.time(), job_id, JobState.QUEUED.value),
            )
        return cur.rowcount == 1

    def requeue_running(self) -> list[str]:
        """After a restart: every RUNNING job (its process died) is QUEUED again."""
        with self._tx() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM jobs WHERE state = ?", (JobState.RUNNING.value,))]
            db.execute("UPDATE jobs SET state = ?, updated = ? WHERE state = ?", (JobState.QUEUED.value, time.time(), JobState.RUNNING.value))
        return ids

    def add_results(self, job_id: str, results: Iterable[tuple[int, Mapping[str, Any]]]) -> int:
        """Store rows' results (row_scores entries) in one commit; a row already stored keeps
        its first result. Returns how many were new; the job's counts follow."""
        ok: list[tuple[str, int, int, str]] = []
        bad: list[tuple[str, int, int, str]] = []
        for index, entry in results:
            failed = "error" in entry
            (bad if failed else ok).append((job_id, index, int(failed), orjson.dumps(entry).decode()))
        insert = "INSERT OR IGNORE INTO row_results (job_id, row_index, failed, result) VALUES (?, ?, ?, ?)"
        with self._tx() as db:
            new_ok = db.executemany(insert, ok).rowcount if ok else 0
            new_bad = db.executemany(insert, bad).rowcount if bad else 0
            db.execute(
                "UPDATE jobs SET done = done + ?, failed = failed + ?, updated = ? WHERE id = ?",
                (new_ok + new_bad, new_bad, time.time(), job_id),
            )
        return new_ok + new_bad

    def stored_indices(self, job_id: str) -> set[int]:
        with self._lock:
            return {r[0] for r in self._db.execute("SELECT row_index FROM row_results WHERE job_id = ?", (job_id,))}

    def read_results(self, job_id: str, *, start: int = 0, max_bytes: int = 1 << 20) -> tuple[list[dict[str, Any]], int | None]:
        """Row results from row index `start`, at most ~`max_bytes` of JSON (at least one
        row); returns them and the next start (None at the end)."""
        out: list[dict[str, Any]] = []
        size = 0
        with self._lock:
            cursor = self._db.execute(
                "SELECT row_index, result FROM row_results WHERE job_id = ? AND row_index >= ? ORDER BY row_index", (job_id, start)
            )
            for index, text in cursor:
                if out and size + len(text) > max_bytes:
                    return out, index
                out.append(orjson.loads(text))
                size += len(text)
        return out, None


def _record(row: tuple[Any, ...]) -> JobRecord:
    job_id, state, spec, created, updated, done, failed, total, error = row
    return JobRecord(job_id, JobState(state), spec, created, updated, done, failed, total, error)


__all__ = ["JobRecord", "JobState", "JobStore"]
