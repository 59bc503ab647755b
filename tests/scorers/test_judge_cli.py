"""`gym-metrics evaluate --metric <judge metric>` end to end against a scripted local judge:
the result file (docs/metrics.md#scorer-results), an unparseable reply recorded on its row, and
no key in the output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gym_metrics.cli import main

from gym_metrics.testing import ScriptedJudge

KEY = "sk-cli-judge-secret-5150"


def test_evaluate_answer_accuracy_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GYM_METRICS_TEST_CLI_KEY", KEY)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"user_input": f"question {i}", "response": f"answer {i}", "reference": f"ref {i}"}) + "\n"
            for i in range(3)
        )
    )
    out = tmp_path / "result.json"
    # parallelism 1: row order = call order; row 2's first template never gives a rating
    with ScriptedJudge(["4", "4", "2", "0", "what?"]) as judge:
        config = tmp_path / "judge.json"
        config.write_text(json.dumps({
            "url": judge.url, "model": "judge", "api_key_env": "GYM_METRICS_TEST_CLI_KEY", "rating_attempts": 1,
        }))
        code = main([
            "evaluate", "--metric", "answer_accuracy", "--metric-config", str(config),
            "--input", str(rows), "-o", str(out), "--parallelism", "1",
        ])
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    [stats] = result["aggregate_scores"]
    assert stats["name"] == "answer_accuracy"
    assert (stats["count"], stats["nan_count"], stats["mean"]) == (2, 1, pytest.approx(0.625))
    scores = [r["scores"]["answer_accuracy"] for r in result["row_scores"]]
    assert scores == [1.0, 0.25, None]
    assert result["row_scores"][2]["error"]["field"] == "judge_reply"
    assert "question 0" in judge.requests[0].text and "answer 0" in judge.requests[0].text
    captured = capsys.readouterr()
    assert KEY not in out.read_text() and KEY not in captured.out and KEY not in captured.err
