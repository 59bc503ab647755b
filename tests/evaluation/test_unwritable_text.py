"""A row whose error or generated text holds a lone surrogate (a JSON `\\ud83d` escape, an emoji
cut in half, which Python's json reads) is that row's: it made the whole result unwritable
(orjson refuses such a string), so `evaluate` wrote nothing and a job ended FAILED with its
scored rows lost. Such text is now written as its escape."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from gym_metrics import cli
from gym_metrics._util.jsonio import writable_text
from gym_metrics.evaluation import RowFailure, ScoreMatrix

OK = '{"user_input": [{"type": "human", "content": "hi"}], "reference_tool_calls": []}'


def test_evaluate_writes_a_run_whose_row_names_a_cut_emoji(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = tmp_path / "rows.jsonl"
    bad = '{"user_input": [{"type": "human", "content": "hi"}], "reference_tool_calls": [], "rubrics": {"\\ud83d": 5}}'
    rows.write_text("\n".join([OK, bad, OK]) + "\n")
    out = tmp_path / "result.json"
    assert cli.main(["evaluate", "--scorer", "tool_call_accuracy", "--input", str(rows), "-o", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [r["scores"]["tool_call_accuracy"] for r in result["row_scores"]] == [1.0, None, 1.0]
    assert result["row_scores"][1]["error"]["field"] == "rubrics.\\ud83d"


def test_the_matrix_keeps_generated_and_failure_texts_writable() -> None:
    matrix = ScoreMatrix(["s"])
    matrix.add(0, None, RowFailure("endpoint", "tokenizer failed at \ud83d"))
    matrix.add(1, {"s": 1.0}, None, {"tool_calls": [{"name": "w", "arguments": {"text\udc00": "\ud83d"}}]})
    entries = matrix.result("s", 2).row_scores
    assert orjson.loads(orjson.dumps(entries)) == [
        {"index": 0, "scores": {"s": None}, "error": {"field": "endpoint", "reason": "tokenizer failed at \\ud83d"}},
        {"index": 1, "scores": {"s": 1.0}, "generated": {"tool_calls": [{"name": "w", "arguments": {"text\\udc00": "\\ud83d"}}]}},
    ]


def test_writable_text_leaves_writable_values_as_they_are() -> None:
    value = {"a": ["é", 1, None, {"b": "😀"}]}
    assert writable_text(value) is value
