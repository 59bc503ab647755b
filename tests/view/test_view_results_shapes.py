"""A scorer results file in every shape the viewer reads, served by a real viewer on 127.0.0.1:
scores that are not numbers, failed rows, entries that are not objects, input lines that are not
JSON or missing, an empty input file, the filters and paging refused naming the field, a file over
the size cap, and aggregate_scores or row_scores that are not lists (a string's characters or a
dict's keys were taken for rows; null answered 500)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gym_metrics.view import Viewer, _results

from test_view_api import get, refused

RESULTS = {"aggregate_scores": [{"name": "s", "mean": 0.5}, {"name": "t"}],
           "row_scores": [{"scores": {"s": 1, "t": 0.25}}, {"scores": {"s": "x", "t": True}}, {"error": "boom", "scores": {}}, "not a dict",
                          {"scores": None}]}  # fmt: skip


def test_rows_filters_and_inputs(tmp_path: Path) -> None:
    (tmp_path / "rows_sc_results.json").write_text(json.dumps(RESULTS))
    (tmp_path / "rows.jsonl").write_text('{"q": 1}\nnot json at all\n\n{"q": 3}\n')
    with Viewer([tmp_path / "rows_sc_results.json"]) as v:
        api = v.url + "api/runs/0/scores"
        [run] = get(v.url + "api/runs")["runs"]
        assert (run["rows"], run["failed"], run["scores"], run["input_file"]) == (5, 1, ["s", "t"], "rows.jsonl")
        rows = get(api + "?limit=10")["rows"]
        assert [r["scores"] for r in rows] == [{"s": 1.0, "t": 0.25}] + [{"s": None, "t": None}] * 4  # "x" and true are no scores
        assert [r["error"] for r in rows] == [None, None, "boom", None, None]
        assert [r["index"] for r in get(api + "?failed=1")["rows"]] == [2]
        assert [r["index"] for r in get(api + "?failed=0")["rows"]] == [0, 1, 3, 4]
        assert get(api + "?score=t&min=0.25&max=0.25")["total"] == 1 and get(api + "?score=t&min=0.5")["total"] == 0
        assert get(api + "/1")["input"] == "not json at all\n"  # its text
        assert get(api + "/2")["input"] == {"q": 3}  # the blank line is no row
        assert get(api + "/4") == {"index": 4, "entry": {"scores": None}, "input": None, "input_file": "rows.jsonl", "previous": 3, "next": None}
        assert refused(api + "?score=s&min=abc")[1]["violations"] == [{"field": "min", "reason": "not a number: 'abc'"}]
        assert refused(api + "?limit=0")[1]["violations"] == [{"field": "limit", "reason": "limit 1..500, offset >= 0"}]
        assert refused(api + "?offset=-1")[1]["violations"] == [{"field": "offset", "reason": "limit 1..500, offset >= 0"}]


def test_an_empty_input_file_pairs_no_row(tmp_path: Path) -> None:
    (tmp_path / "rows_sc_results.json").write_text(json.dumps(RESULTS))
    (tmp_path / "rows.jsonl").write_bytes(b"")
    with Viewer([tmp_path / "rows_sc_results.json"]) as v:
        assert get(v.url + "api/runs/0/scores/0")["input"] is None
        assert [r["preview"] for r in get(v.url + "api/runs/0/scores")["rows"]] == [""] * 5


@pytest.mark.parametrize(("key", "value", "said"), [
    ("row_scores", None, "row_scores is null, not a list"),
    ("row_scores", "abc", 'row_scores is "abc", not a list'),
    ("row_scores", {"a": 1}, 'row_scores is {"a":1}, not a list'),
    ("aggregate_scores", {"name": "s"}, 'aggregate_scores is {"name":"s"}, not a list'),
])  # fmt: skip
def test_scores_that_are_not_lists_are_refused_naming_the_field(tmp_path: Path, key: str, value: object, said: str) -> None:
    path = tmp_path / "rows_sc_results.json"
    path.write_text(json.dumps({**RESULTS, key: value}))
    with Viewer([path]) as v:
        [run] = get(v.url + "api/runs")["runs"]
        assert run["rows"] == 0 and run["error"] == f"rows_sc_results.json is not a scorer results file (aggregate_scores, row_scores): {said}"
        code, body = refused(v.url + "api/runs/0/scores/0")
        assert code == 400 and body["error"] == run["error"]


def test_a_file_over_the_cap_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_results, "MAX_RESULTS_BYTES", 1 << 20)
    path = tmp_path / "big_sc_results.json"
    path.write_text(json.dumps({**RESULTS, "pad": "x" * (1 << 20)}))
    with Viewer([path]) as v:
        assert get(v.url + "api/runs")["runs"][0]["error"] == "big_sc_results.json is over 1 MB: not read"
