"""The same job gives the same outcome wherever it runs (issue 24, item 10): a job whose every
row fails is FAILED both as a local `Evaluator().submit` and on a job server (the server's
rule), `get_result()` raises JobError with the same reason and the rows in `error.result`,
and `run` does the same locally and against the server (an unreadable line of a file stops
it with the same error). A job with one good row succeeds in both."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.errors import InvalidInputError
from gym_metrics.sdk import Evaluator, JobError, ToolCallAccuracyMetric

sys.path.insert(0, str(Path(__file__).parents[1] / "jobs"))
from _service_helpers import JobServerThread  # noqa: E402

pytestmark = pytest.mark.timeout(120)

BAD = {"user_input": "not a list of messages", "reference_tool_calls": []}
GOOD = {"user_input": [{"content": "hi", "type": "human"}], "reference_tool_calls": []}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobServerThread]:
    with JobServerThread(tmp_path_factory.mktemp("jobs") / "jobs.sqlite") as running:
        yield running


def reason(error: JobError) -> str:
    return str(error).split(" is ", 1)[1]  # without the job's name


def failed_result(get: Any) -> JobError:
    with pytest.raises(JobError) as caught:
        get()
    assert caught.value.state == "FAILED"
    return caught.value


def test_every_row_failed_is_failed_here_and_on_a_server(server: JobServerThread) -> None:
    rows = [BAD] * 3
    local = Evaluator().submit(metric=ToolCallAccuracyMetric(), dataset=rows)
    with Evaluator(server.address) as remote:
        job = remote.submit(metric=ToolCallAccuracyMetric(), dataset=rows)
        assert job.wait_until_done(timeout=60) == "FAILED"
        on_server = failed_result(job.get_result)
        run_on_server = failed_result(lambda: remote.run(metric=ToolCallAccuracyMetric(), dataset=rows))
    assert local.wait_until_done(timeout=60) == "FAILED"  # was SUCCEEDED
    here = failed_result(local.get_result)
    run_here = failed_result(lambda: Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=rows))  # returned before
    assert reason(here) == reason(on_server) == reason(run_here) == reason(run_on_server)
    assert "every row failed (3 of 3)" in reason(here)
    results = [e.result for e in (here, on_server, run_here, run_on_server)]
    assert all(r is not None for r in results)
    docs = [r.to_dict() for r in results if r is not None]
    assert all(d == docs[0] for d in docs)
    assert all("error" in row for row in docs[0]["row_scores"])


def test_one_good_row_succeeds_here_and_on_a_server(server: JobServerThread) -> None:
    rows = [BAD, GOOD]
    local = Evaluator().submit(metric=ToolCallAccuracyMetric(), dataset=rows)
    with Evaluator(server.address) as remote:
        job = remote.submit(metric=ToolCallAccuracyMetric(), dataset=rows)
        assert job.wait_until_done(timeout=60) == "SUCCEEDED"
        on_server = job.get_result().to_dict()
        assert remote.run(metric=ToolCallAccuracyMetric(), dataset=rows).to_dict() == on_server
    assert local.wait_until_done(timeout=60) == "SUCCEEDED"
    assert local.get_result().to_dict() == on_server
    assert Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=rows).to_dict() == on_server


def test_an_unreadable_line_stops_run_the_same_here_and_on_a_server(server: JobServerThread, tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(GOOD) + "\n{not json\n" + json.dumps(GOOD) + "\n")
    with Evaluator(server.address) as remote, pytest.raises(InvalidInputError) as on_server:
        remote.run(metric=ToolCallAccuracyMetric(), dataset=path)
    with pytest.raises(InvalidInputError) as here:  # was a result with the line as a row error
        Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=path)
    assert str(here.value) == str(on_server.value) and "line 2" in str(here.value)
    with pytest.raises(InvalidInputError) as submitted:  # submit too, before anything is scored (it gave a job that failed later)
        Evaluator().submit(metric=ToolCallAccuracyMetric(), dataset=path)
    assert str(submitted.value) == str(here.value)


def test_nan_and_long_integers_in_rows_score_on_a_server_as_here(server: JobServerThread, tmp_path: Path) -> None:
    """Rows are read as Python's json reads them (docs/evaluation.md): the job spec re-encoded
    them with orjson, which wrote NaN as null (scored 0 where `evaluate` gives 1) and refused an
    integer past 64 bits (an internal error)."""
    path = tmp_path / "rows.jsonl"
    calls = '{"user_input": [{"type": "human", "content": "w"}, {"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": {"x": %s}}]}], ' \
            '"reference_tool_calls": [{"name": "f", "args": {"x": %s}}]}'  # fmt: skip
    path.write_text(calls % ("NaN", '"nan"') + "\n" + calls % ("123456789012345678901234567890", "123456789012345678901234567890") + "\n")
    here = Evaluator().run(metric=ToolCallAccuracyMetric(), dataset=path)
    with Evaluator(server.address) as remote:
        there = remote.run(metric=ToolCallAccuracyMetric(), dataset=path)
    assert [r.scores for r in here.row_scores] == [r.scores for r in there.row_scores] == [{"tool_call_accuracy": 1.0}] * 2
