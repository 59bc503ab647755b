"""`evaluate` shows its progress as collect does: rows done, failed, rows/s and ETA, redrawn on a
terminal; a line every few seconds otherwise (the line is gym_metrics._util.progress's, collect's too)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from gym_metrics import cli
from gym_metrics._util.progress import ProgressLine, format_seconds
from gym_metrics.collector import Progress
from gym_metrics.evaluation import RowProgress, evaluate, read_rows

DATA = Path(__file__).parents[1] / "data" / "tool_call_accuracy"


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_evaluate_counts_rows_and_failures_on_a_terminal() -> None:
    stream = Tty()
    progress = RowProgress(16, stream=stream)
    rows = list(read_rows(DATA / "cases.jsonl")) + ["not an object"]
    result = evaluate("tool_call_accuracy", rows, progress=progress)
    progress.close()
    text = stream.getvalue()
    assert len(result) == 16 and progress.rows == 16 and progress.failed == 1
    assert text.startswith("\r\x1b[2K") and text.endswith("\n")
    last = text.rsplit("\r\x1b[2K", 1)[1]
    assert "16/16 rows" in last and "/s" in last and "1 failed" in last, last


def test_a_line_every_interval_when_not_a_terminal() -> None:
    stream = io.StringIO()
    progress = RowProgress(4, stream=stream, log_every_s=0.0)
    for failed in (False, True):
        progress.add(failed)
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("evaluate: [") and "1/4 rows" in lines[0] and "ETA" in lines[0]
    assert "2/4 rows" in lines[1] and "1 failed" in lines[1]
    assert "\r" not in stream.getvalue()


def test_a_quick_run_not_on_a_terminal_prints_nothing() -> None:
    stream = io.StringIO()
    progress = RowProgress(2, stream=stream)  # the interval (5 s) never passes
    progress.add(False)
    progress.close()
    assert stream.getvalue() == ""


def test_the_cli_draws_the_line_on_a_terminal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cases = Path(shutil.copy(DATA / "cases.jsonl", tmp_path / "cases.jsonl"))
    err = Tty()
    monkeypatch.setattr("sys.stderr", err)
    assert cli.main(["evaluate", "--scorer", "tool_call_accuracy", "--input", str(cases)]) == 0
    last = err.getvalue().rsplit("\r\x1b[2K", 1)[-1]
    assert "15/15 rows" in last and "0 failed" in last, err.getvalue()
    assert json.loads(cases.with_name("cases_tool_call_accuracy_results.json").read_text())["aggregate_scores"]


def test_collect_and_evaluate_share_the_line() -> None:
    assert issubclass(Progress, ProgressLine) and issubclass(RowProgress, ProgressLine)
    stream = Tty()
    progress = Progress(10, stream=stream)
    progress.add("a", 1.0)
    assert "1/10 rollouts" in progress.summary() and "ETA" in progress.summary()
    assert [format_seconds(s) for s in (5, 185, 7620)] == ["5s", "3m05s", "2h07m"]
