"""JobStore on a real SQLite file: WAL, one result per row, counts, pages and parts."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from gym_metrics.errors import InvalidInputError, NotFoundError
from gym_metrics.jobs import JobSpec, JobState, JobStore, parse_spec


def spec(n: int = 3) -> JobSpec:
    return parse_spec({"scorer": "tool_call_accuracy", "dataset": {"rows": [{"i": i} for i in range(n)]}})


def test_jobs_are_stored_listed_by_state_and_paged(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    ids = [store.create(spec()).id for _ in range(5)]
    store.set_state(ids[1], JobState.RUNNING)
    assert [r.id for r in store.list_jobs(JobState.QUEUED)] == [ids[0], *ids[2:]]
    first = store.list_jobs(limit=2)
    second = store.list_jobs(limit=2, after=first[-1].id)
    third = store.list_jobs(limit=2, after=second[-1].id)
    assert [r.id for r in first + second + third] == ids
    stored = store.get(ids[0])  # inline rows live in the row table, written once; the spec keeps none
    assert stored.spec == spec().model_copy(update={"dataset": spec().dataset.model_copy(update={"rows": []})})
    assert list(store.rows(ids[0])) == spec().dataset.rows and stored.inline_rows == stored.total == 3
    assert sqlite3.connect(tmp_path / "jobs.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(NotFoundError):
        store.get("nope")


def test_each_row_is_stored_once_and_counted_once(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    job = store.create(spec()).id
    ok = {"index": 0, "scores": {"s": 1.0}}
    bad = {"index": 1, "scores": {"s": None}, "error": {"field": "row", "reason": "boom"}}
    assert store.add_results(job, [(0, ok), (1, bad)]) == 2
    assert store.add_results(job, [(0, {"index": 0, "scores": {"s": 0.0}}), (2, ok | {"index": 2})]) == 1
    record = store.get(job)
    assert (record.done, record.failed) == (3, 1)
    rows, nxt = store.read_results(job)
    assert nxt is None and rows[0]["scores"] == {"s": 1.0} and rows[1]["error"]["reason"] == "boom"
    assert store.stored_indices(job) == {0, 1, 2}


def test_results_are_read_in_size_bounded_parts(tmp_path: Path) -> None:
    store = JobStore(tmp_path / "jobs.sqlite")
    job = store.create(spec()).id
    store.add_results(job, [(i, {"index": i, "scores": {"s": float(i)}, "pad": "x" * 100}) for i in range(50)])
    seen, start, parts = [], 0, 0
    while start is not None:
        part, start = store.read_results(job, start=start, max_bytes=1000)
        assert 1 <= len(part) <= 9
        seen += [r["index"] for r in part]
        parts += 1
    assert seen == list(range(50)) and parts >= 6


def test_a_spec_names_fields_when_it_is_wrong() -> None:
    with pytest.raises(InvalidInputError) as err:
        parse_spec({"scorer": "x", "dataset": {"rows": [], "path": "a.jsonl"}, "secrets": ["no-dash"]})
    fields = {v.field for v in err.value.violations}
    assert "dataset" in fields and "secrets" in fields
    with pytest.raises(InvalidInputError, match="goes with a target"):
        parse_spec({"scorer": "x", "dataset": {"rows": []}, "prompt_template": {"messages": []}})


def test_a_request_id_answers_the_job_it_stored_after_a_restart_too(tmp_path: Path) -> None:
    from gym_metrics.errors import InvalidInputError

    store = JobStore(tmp_path / "jobs.sqlite")
    first, new = store.create_once(spec(), "req-1")
    assert new and store.create_once(spec(), "req-1") == (first, False)
    store.close()
    reopened = JobStore(tmp_path / "jobs.sqlite")  # kept with the job: a retry after a restart finds it
    assert reopened.create_once(spec(), "req-1") == (first, False) and len(reopened.list_jobs()) == 1
    with pytest.raises(InvalidInputError, match="another job spec"):
        reopened.create_once(parse_spec({"scorer": "tool_call_accuracy", "dataset": {"rows": [{"x": 2}]}}), "req-1")
    assert reopened.create_once(spec(), "")[1] and reopened.create_once(spec())[1]  # no request_id: each is new
