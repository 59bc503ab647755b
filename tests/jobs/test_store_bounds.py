"""What a hostile or unlucky job cannot do to the job server: a large inline dataset is written
once (progress never rewrites it), a CPU-bound job stops when cancelled, parallelism has a
ceiling, a full disk pauses a job instead of failing it, and an old database still opens."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sqlite3
import time
from pathlib import Path

import orjson
import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.jobs import JobExecutor, JobState, JobStore, JobProgress, job_result, parse_spec

from _jobs_helpers import tool_row


def big_rows(n: int, pad: int) -> list[dict[str, object]]:
    return [tool_row(i) | {"pad": "x" * pad} for i in range(n)]


def test_inline_rows_are_written_once_and_progress_stays_small(tmp_path: Path) -> None:
    """The regression: every progress commit rewrote the whole jobs row, rows included (a 47 MB
    job ran at 2.4 rows/s and its WAL reached 86 MB)."""
    db = tmp_path / "jobs.sqlite"
    store = JobStore(db)
    rows = big_rows(2_000, 2_000)  # ~4.5 MB inline
    job = store.create(parse_spec({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}})).id
    size = sum(len(orjson.dumps(r)) for r in rows)
    wal = Path(f"{db}-wal")
    after_create = wal.stat().st_size
    for i in range(200):  # 200 progress commits, as a job makes them
        store.add_results(job, [(i, {"index": i, "scores": {"s": 1.0}})])
    growth = wal.stat().st_size - after_create
    assert growth < size / 4, f"200 commits grew the WAL by {growth:,} bytes (rows: {size:,})"
    (spec_len,) = sqlite3.connect(db).execute("SELECT length(spec) FROM jobs WHERE id = ?", (job,)).fetchone()
    assert spec_len < 1_000
    assert list(store.rows(job)) == rows  # read back a chunk at a time, in order
    assert list(store.rows(job, start=1_999)) == rows[-1:]


async def test_a_job_reads_its_rows_from_the_row_table_with_limit_samples(tmp_path: Path) -> None:
    rows = [tool_row(i) for i in range(2_500)]  # more than one read chunk
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"))
    await executor.start()
    try:
        job = executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}, "run": {"limit_samples": 2_100}})
        assert job.total == 2_100  # known at submit
        record = await executor.wait(job.id, timeout=120)
    finally:
        await executor.aclose()
    assert record.state is JobState.SUCCEEDED and record.done == 2_100
    assert [r["index"] for r in job_result(executor.store, job.id).to_dict()["row_scores"]] == list(range(2_100))


async def test_cancel_stops_a_cpu_bound_job_at_once(tmp_path: Path) -> None:
    """The regression: a CPU-only scorer never yielded, so a job cancelled at 120k of 1M rows
    scored every row and only then became CANCELLED."""
    gc.disable()  # while the rows are made, and then they are frozen: the collector's passes over
    try:  # their 2M containers took 4-5 of the test's 7 s (the job's own objects are collected as ever)
        rows = [tool_row(i) for i in range(200_000)]
        gc.freeze()
    finally:
        gc.enable()
    try:
        executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), flush_seconds=0.05)
        await executor.start()
        try:
            job = executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}})
            for _ in range(600):  # bounded: until some rows are stored
                if (await asyncio.to_thread(executor.store.get, job.id)).done >= 2_000:
                    break
                await asyncio.sleep(0.05)
            executor.cancel(job.id)
            record = await executor.wait(job.id, timeout=60)
        finally:
            await executor.aclose()
    finally:
        gc.unfreeze()
    assert record.state is JobState.CANCELLED
    assert record.done < 150_000, f"scored {record.done} of 200000 rows after the cancel"


def test_parallelism_over_the_ceiling_is_refused(tmp_path: Path) -> None:
    executor = JobExecutor(JobStore(tmp_path / "jobs.sqlite"), max_parallelism=64)
    with pytest.raises(InvalidInputError) as err:
        executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": []}, "run": {"parallelism": 1_000_000}})
    assert err.value.violations[0].field == "run.parallelism" and "64" in str(err.value)
    assert executor.store.list_jobs() == []
    executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": []}, "run": {"parallelism": 64}})


async def test_a_full_disk_pauses_a_job_and_it_resumes_when_space_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite's max_page_count gives the real SQLITE_FULL ("database or disk is full")."""
    store = JobStore(tmp_path / "jobs.sqlite")
    seen: list[JobProgress] = []
    executor = JobExecutor(store, flush_seconds=0, on_progress=seen.append)
    rows = big_rows(3_000, 200)
    job = executor.submit({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}, "run": {"parallelism": 4}})
    (pages,) = store._db.execute("PRAGMA page_count").fetchone()
    store._db.execute(f"PRAGMA max_page_count = {pages + 2}")  # results soon fill the "disk"
    caplog.set_level(logging.INFO, "gym_metrics.jobs")
    await executor.start()
    try:
        for _ in range(400):  # bounded: until the job says it is paused
            if any(p.note and "full" in p.note for p in seen):
                break
            await asyncio.sleep(0.05)
        paused = await asyncio.to_thread(store.get, job.id)
        assert paused.state is JobState.RUNNING and paused.done < len(rows)
        store._db.execute("PRAGMA max_page_count = 1073741823")  # space is back
        record = await executor.wait(job.id, timeout=120)
    finally:
        await executor.aclose()
    assert record.state is JobState.SUCCEEDED and record.done == len(rows) and not record.error
    assert store.stored_indices(job.id) == set(range(len(rows)))
    assert "paused" in caplog.text and "resumed" in caplog.text


def test_a_zero_byte_database_is_said_in_the_log(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "jobs.sqlite"
    db.touch()
    with caplog.at_level(logging.WARNING, "gym_metrics.jobs"):
        store = JobStore(db)
    assert "empty (0-byte)" in caplog.text and str(db) in caplog.text
    assert store.list_jobs() == []


OLD_SCHEMA = """
CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT NOT NULL, spec TEXT NOT NULL, created REAL NOT NULL,
    updated REAL NOT NULL, done INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0, total INTEGER, error TEXT);
CREATE INDEX jobs_by_state ON jobs (state, created);
CREATE TABLE row_results (job_id TEXT NOT NULL REFERENCES jobs (id), row_index INTEGER NOT NULL,
    failed INTEGER NOT NULL, result TEXT NOT NULL, PRIMARY KEY (job_id, row_index)) WITHOUT ROWID;
"""


async def test_a_job_queued_by_an_older_version_still_runs(tmp_path: Path) -> None:
    """Databases written before rows had their own table keep the rows in the spec."""
    db = tmp_path / "jobs.sqlite"
    rows = [tool_row(i) for i in range(30)]
    old = sqlite3.connect(db)
    old.executescript(OLD_SCHEMA)
    spec = parse_spec({"scorer": "tool_call_accuracy", "dataset": {"rows": rows}}).model_dump_json()
    old.execute("INSERT INTO jobs (id, state, spec, created, updated) VALUES ('old', 'QUEUED', ?, ?, ?)", (spec, time.time(), time.time()))
    old.commit()
    old.close()
    executor = JobExecutor(JobStore(db))
    await executor.start()
    try:
        record = await executor.wait("old", timeout=60)
    finally:
        await executor.aclose()
    assert record.state is JobState.SUCCEEDED and record.done == record.total == 30 and record.inline_rows is None
    assert os.path.getsize(db) > 0


def test_inline_row_texts_are_kept_exactly_even_pretty_printed(tmp_path: Path) -> None:
    from gym_metrics.jobs import RowTexts

    store = JobStore(tmp_path / "jobs.sqlite")
    rows = [{"a": "line\nbreak\r\n", "b": [1, 2.5, None]}, {"nested": {"x": "\u2028 é"}}, [1, 2], "text", 3]
    texts = [orjson.dumps(r, option=orjson.OPT_INDENT_2).decode().replace("\n", "\r\n") for r in rows]
    texts += [orjson.dumps(r).decode() for r in rows]
    job = store.create(parse_spec({"scorer": "tool_call_accuracy", "dataset": {"rows": RowTexts(texts)}})).id
    assert list(store.rows(job)) == rows + rows
