"""The viewer over requests and files it cannot show, on a real server (127.0.0.1:0): each is
answered with an error naming what is wrong (a 404, or the run's own error), never a 500, and
the other runs stay listed."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gym_metrics.view import Viewer

from _viewer_data import row

MARK = "²"
"""A digit to str.isdigit, not to int()."""


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as res:
        return json.loads(res.read())


def refused(url: str) -> tuple[int, Any]:
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(url, timeout=30)
    return err.value.code, json.loads(err.value.read() or b"null")


def nest(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


def indexed(v: Viewer, run: int, rows: int) -> None:
    for _ in range(600):
        if get(v.url + f"api/runs/{run}").get("rows") == rows:
            return
        time.sleep(0.05)
    raise AssertionError("the viewer did not index the run in time")


def test_a_number_in_the_path_that_is_not_ascii_digits_is_404_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text(json.dumps(row("a", 0, 0, 1.0)) + "\n")
    with Viewer([tmp_path / "a.jsonl"]) as v:
        indexed(v, 0, 1)
        for path, part in ((f"api/runs/{MARK}", "run"), (f"api/runs/0/rollouts/{MARK}", "line"),
                           ("api/runs/" + "9" * 5000, "run"), (f"api/compare?a={MARK}&b=0", "run")):  # fmt: skip
            code, body = refused(v.url + urllib.parse.quote(path, safe="/?=&"))
            assert code == 404 and body["error"].startswith(f"no {part} "), (path, body)
        assert get(v.url + "api/runs/0/rollouts/1")["task"] == 0


def test_a_prompt_nested_past_the_json_writer_lists_with_a_note(tmp_path: Path) -> None:
    deep = row("a", 1, 0, 0.0)
    deep["responses_create_params"]["input"] = [{"role": "user", "content": nest(300)}]
    (tmp_path / "deep.jsonl").write_text(json.dumps(row("a", 0, 0, 1.0)) + "\n" + json.dumps(deep) + "\n")
    with Viewer([tmp_path / "deep.jsonl"]) as v:
        indexed(v, 0, 2)
        rows = get(v.url + "api/runs/0/rows")["rows"]
        assert [r["preview"] for r in rows][1] == "(nested too deep to preview)"
        assert get(v.url + "api/runs/0/rollouts/2")["row"] is None  # opened as its text (MAX_ROW_DEPTH)


def test_deep_metrics_are_their_runs_error_and_the_others_are_listed(tmp_path: Path) -> None:
    """key_metrics 300 deep (plain's recursion) and a file 500 deep (the answer's writer) broke
    /api/runs, so the home page, for every run."""
    for stem, doc in (("keys", [{"agent_ref": {"name": "a"}, "key_metrics": nest(300)}]),
                      ("file", [{"agent_ref": {"name": "a"}, "key_metrics": {"mean/reward": 1.0}, "sample": nest(500)}]),
                      ("good", [{"agent_ref": {"name": "a"}, "key_metrics": {"mean/reward": 0.5}}])):  # fmt: skip
        (tmp_path / f"{stem}.jsonl").write_text(json.dumps(row("a", 0, 0, 1.0)) + "\n")
        (tmp_path / f"{stem}_aggregate_metrics.json").write_text(json.dumps(doc))
    (tmp_path / "alone_aggregate_metrics.json").write_text(json.dumps([{"agent_ref": {"name": "a"}, "groups": nest(500)}]))
    with Viewer([tmp_path / "keys.jsonl", tmp_path / "file.jsonl", tmp_path / "good.jsonl", tmp_path / "alone_aggregate_metrics.json"]) as v:
        runs = {r["name"]: r for r in get(v.url + "api/runs")["runs"]}
        assert runs["keys.jsonl"]["error"] == "keys_aggregate_metrics.json: key_metrics of agent 'a': nested deeper than 200 levels: not shown"
        assert runs["file.jsonl"]["error"] == "file_aggregate_metrics.json nests deeper than 400 levels: not shown"
        assert runs["good.jsonl"]["error"] is None and runs["good.jsonl"]["key_metrics"] == {"a": {"mean/reward": 0.5}}
        assert "nests deeper than 400 levels" in runs["alone_aggregate_metrics.json"]["error"]
        for i in range(4):
            assert get(v.url + f"api/runs/{i}")["id"] == i
        assert "nests deeper" in get(v.url + "api/runs/3")["metrics"]["error"]
