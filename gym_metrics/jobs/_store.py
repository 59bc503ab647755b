"""The durable half of jobs: one SQLite file (WAL) holding each job, its spec, its inline rows
and one result per row, so a job outlives the process that runs it and resumes where it stopped.

A job's inline rows are written once, to their own table: the `jobs` row stays a few hundred
bytes, so a progress update (every commit of results) rewrites that, never the dataset. Reads
go through a connection of their own (WAL: readers never wait for the writer's transaction),
so GetJob and ListJobs stay fast while a job commits results."""

from __future__ import annotations

import hashlib
import logging
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

from gym_metrics._util.jsonio import dumps, loads
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError, NotFoundError
from gym_metrics.jobs._spec import JobSpec, RowTexts
from gym_metrics.models import JobState

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
    error TEXT,
    inline_rows INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state, created);
CREATE TABLE IF NOT EXISTS row_results (
    job_id TEXT NOT NULL REFERENCES jobs (id),
    row_index INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (job_id, row_index)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_sources (
    job_id TEXT PRIMARY KEY REFERENCES jobs (id),
    identity TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS job_requests (
    request_id TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs (id),
    digest TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_rows (
    job_id TEXT NOT NULL REFERENCES jobs (id),
    first_row INTEGER NOT NULL,
    rows TEXT NOT NULL,
    PRIMARY KEY (job_id, first_row)
);
"""
_COLUMNS = "id, state, spec, created, updated, done, failed, total, error, inline_rows"
ROWS_CHUNK = 1000
"""Inline rows per stored chunk (a 200k-row job is 200 inserts, not 200k) and per read while a
job iterates them."""

log = logging.getLogger("gym_metrics.jobs")
SQLITE_FULL = 13  # sqlite3.SQLITE_FULL from Python 3.11 on


class StoreFullError(GymMetricsError):
    """SQLite said `database or disk is full`: a transient condition (space can come back),
    so callers wait and retry instead of failing a job for good."""


def is_full(exc: BaseException) -> bool:
    """True for SQLite's SQLITE_FULL (disk full, or the database's max_page_count reached)."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if code is not None:
        return bool(code & 0xFF == SQLITE_FULL)
    return isinstance(exc, sqlite3.OperationalError) and "full" in str(exc)


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
    inline_rows: int | None = None
    """How many inline rows the store holds for this job in its row table (`JobStore.rows`);
    None for a file dataset, or a job stored before rows had a table (they are in its spec)."""

    @cached_property
    def spec(self) -> JobSpec:
        """The spec as stored: inline rows moved to the row table leave `dataset.rows` empty."""
        return JobSpec.model_validate_json(self.spec_json)


class JobStore:
    """Jobs, their rows and row results in one SQLite file. Thread-safe: one writer connection
    and one reader connection, each behind its own lock (the executor's job threads write
    while the servicer's threads read). Writes that find the disk full raise StoreFullError."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        if os.path.exists(self.path) and os.path.getsize(self.path) == 0:
            log.warning("job database %s is an empty (0-byte) file: starting with no jobs", self.path)
        self._lock, self._read_lock = threading.Lock(), threading.Lock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL: a crash loses no committed row
            self._db.executescript(_SCHEMA)
            if "inline_rows" not in {r[1] for r in self._db.execute("PRAGMA table_info(jobs)")}:  # a database from before
                self._db.execute("ALTER TABLE jobs ADD COLUMN inline_rows INTEGER")
            self._reader = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        except sqlite3.Error as exc:  # a directory, a missing folder, a file that is not SQLite
            why = "a directory" if os.path.isdir(self.path) else str(exc)
            raise InvalidInputError(f"cannot use {self.path} as the job database (--db): {why}") from None

    def close(self) -> None:
        with self._lock, self._read_lock:
            self._db.close()
            self._reader.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    if self._db.in_transaction:  # SQLITE_FULL may have rolled it back already
                        self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if not is_full(exc):
                    raise
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreFullError(f"cannot write the job database {self.path}: {exc}") from None

    def _read(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        with self._read_lock:
            return self._reader.execute(sql, args).fetchall()

    def create(self, spec: JobSpec, request_id: str = "") -> JobRecord:
        """Store a new QUEUED job; the spec holds secret names only, never values. Inline rows
        go to the row table, once (the total is known now). `request_id` (SubmitJob's): the job
        stored with it before is the answer (`created` False) instead of a second one; with
        another spec, InvalidInputError naming it."""
        return self.create_once(spec, request_id)[0]

    def create_once(self, spec: JobSpec, request_id: str = "", digest: str = "") -> tuple[JobRecord, bool]:
        """`create`, and whether the job is new. `digest`: the spec's `request_digest` as its
        client sent it (before a server's defaults), else this spec's."""
        job_id, now = uuid.uuid4().hex, time.time()
        rows = spec.dataset.rows
        inline = None if rows is None else len(rows)
        total = None if inline is None else inline if spec.run.limit_samples is None else min(inline, spec.run.limit_samples)
        stored_json = _without_rows(spec).model_dump_json()
        if request_id and not digest:
            digest = _digest(stored_json, rows)
        found = None
        with self._tx() as db:
            if request_id:
                found = db.execute("SELECT job_id, digest FROM job_requests WHERE request_id = ?", (request_id,)).fetchone()
            if found is not None:
                _same_request(request_id, found, digest)
                job_id = found[0]
            else:
                db.execute(
                    f"INSERT INTO jobs ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, 0, 0, ?, NULL, ?)",
                    (job_id, JobState.QUEUED.value, stored_json, now, now, total, inline),
                )
                if rows:
                    db.executemany("INSERT INTO job_rows (job_id, first_row, rows) VALUES (?, ?, ?)", _chunks(job_id, rows))
                if request_id:
                    db.execute("INSERT INTO job_requests (request_id, job_id, digest) VALUES (?, ?, ?)", (request_id, job_id, digest))
        return self.get(job_id), found is None

    def requested(self, request_id: str, digest: str) -> JobRecord | None:
        """The job stored with `request_id`, if any (its spec's digest must be `digest`): looked
        up before a submission is checked again, so a retry is answered even where the server's
        files or settings changed since."""
        found = self._read("SELECT job_id, digest FROM job_requests WHERE request_id = ?", (request_id,))
        if not found:
            return None
        _same_request(request_id, found[0], digest)
        return self.get(found[0][0])

    def get(self, job_id: str) -> JobRecord:
        rows = self._read(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        if not rows:
            raise NotFoundError(f"no job {job_id!r}")
        return _record(rows[0])

    def rows(self, job_id: str, start: int = 0) -> Iterator[Any]:
        """A job's inline rows in order from `start`, a stored chunk at a time (the read lock
        is never held between chunks)."""
        first = start - start % ROWS_CHUNK
        while found := self._read("SELECT rows FROM job_rows WHERE job_id = ? AND first_row = ?", (job_id, first)):
            for text in found[0][0].split("\n")[start - first :]:
                yield loads(text)  # one row at a time: each is garbage once scored; as Python's json reads it
            first += ROWS_CHUNK
            start = first

    def list_jobs(self, state: JobState | None = None, *, limit: int = 100, after: str | None = None) -> list[JobRecord]:
        """Jobs oldest first, at most `limit`, those after job id `after` (the page token)."""
        where, args = ["1 = 1"], []
        if state is not None:
            where.append("state = ?")
            args.append(state.value)
        if after is not None:
            where.append("(created, id) > (SELECT created, id FROM jobs WHERE id = ?)")
            args.append(after)
        sql = f"SELECT {_COLUMNS} FROM jobs WHERE {' AND '.join(where)} ORDER BY created, id LIMIT ?"
        return [_record(r) for r in self._read(sql, (*args, max(1, limit)))]

    def set_state(self, job_id: str, state: JobState, *, error: str | None = None, total: int | None = None) -> JobRecord:
        with self._tx() as db:
            db.execute(
                "UPDATE jobs SET state = ?, error = coalesce(?, error), total = coalesce(?, total), updated = ? WHERE id = ?",
                (state.value, error, total, time.time(), job_id),
            )
        return self.get(job_id)

    def source(self, job_id: str, identity: str) -> str:
        """The identity of a job's dataset file when it first started (`identity`, kept now,
        when this is its first start): a resumed job checks its file is still that one."""
        with self._tx() as db:
            db.execute("INSERT OR IGNORE INTO job_sources (job_id, identity) VALUES (?, ?)", (job_id, identity))
            return str(db.execute("SELECT identity FROM job_sources WHERE job_id = ?", (job_id,)).fetchone()[0])

    def cancel_if_queued(self, job_id: str) -> bool:
        """CANCELLED now when still QUEUED (nothing runs it yet); False otherwise."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state = ?, updated = ? WHERE id = ? AND state = ?",
                (JobState.CANCELLED.value, time.time(), job_id, JobState.QUEUED.value),
            )
        return cur.rowcount == 1

    def start_if_queued(self, job_id: str) -> bool:
        """RUNNING now when still QUEUED; False when something else moved it first (a cancel
        that landed between the dispatcher's listing and this)."""
        with self._tx() as db:
            cur = db.execute(
                "UPDATE jobs SET state = ?, updated = ? WHERE id = ? AND state = ?",
                (JobState.RUNNING.value, time.time(), job_id, JobState.QUEUED.value),
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
        return {r[0] for r in self._read("SELECT row_index FROM row_results WHERE job_id = ?", (job_id,))}

    def read_results(self, job_id: str, *, start: int = 0, max_bytes: int = 1 << 20) -> tuple[list[dict[str, Any]], int | None]:
        """Row results from row index `start`, at most ~`max_bytes` of JSON (at least one
        row); returns them and the next start (None at the end)."""
        out: list[dict[str, Any]] = []
        size = 0
        with self._read_lock:
            cursor = self._reader.execute(
                "SELECT row_index, result FROM row_results WHERE job_id = ? AND row_index >= ? ORDER BY row_index", (job_id, start)
            )
            try:
                for index, text in cursor:
                    if out and size + len(text) > max_bytes:
                        return out, index
                    out.append(orjson.loads(text))
                    size += len(text)
            finally:
                cursor.close()  # ends the read transaction: the WAL can be checkpointed
        return out, None


def _chunks(job_id: str, rows: RowTexts | list[Any]) -> Iterator[tuple[str, int, str]]:
    """Inline rows as stored: ROWS_CHUNK rows a chunk, one JSON text a line, each row's text as
    it arrived (RowTexts) or as jsonio writes it (NaN and long integers kept). A valid JSON text holds a line break only
    as whitespace (never inside a string), so writing it as a space keeps the row exact."""
    for first in range(0, len(rows), ROWS_CHUNK):
        if isinstance(rows, RowTexts):
            texts = [_line(t) for t in rows.texts[first : first + ROWS_CHUNK]]
        else:
            texts = [dumps(r) for r in rows[first : first + ROWS_CHUNK]]
        yield job_id, first, "\n".join(texts)


def _line(text: str) -> str:
    return text.replace("\n", " ").replace("\r", " ") if "\n" in text or "\r" in text else text


def _without_rows(spec: JobSpec) -> JobSpec:
    """The spec as stored: inline rows go to their own table."""
    rows = spec.dataset.rows
    return spec if rows is None else spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"rows": []})})


def request_digest(spec: JobSpec) -> str:
    """What a request_id is checked against: the spec and its inline rows."""
    return _digest(_without_rows(spec).model_dump_json(), spec.dataset.rows)


def _same_request(request_id: str, found: tuple[Any, ...], digest: str) -> None:
    if found[1] != digest:
        why = f"{request_id!r} was sent with another job spec (job {found[0]}): a new job needs a new request_id"
        raise InvalidInputError("invalid job request", [FieldViolation("request_id", why)])


def _digest(spec_json: str, rows: RowTexts | list[Any] | None) -> str:
    """What a request_id is checked against: the stored spec and its inline rows, as stored."""
    digest = hashlib.sha256(spec_json.encode())
    for _, _, chunk in _chunks("", rows or []):
        digest.update(b"\n" + chunk.encode())
    return digest.hexdigest()


def _record(row: tuple[Any, ...]) -> JobRecord:
    job_id, state, spec, created, updated, done, failed, total, error, inline_rows = row
    return JobRecord(job_id, JobState(state), spec, created, updated, done, failed, total, error, inline_rows)


__all__ = ["JobRecord", "JobState", "JobStore", "StoreFullError", "is_full"]
