"""FailureLog: the first failure's reason at once, then a line at most every `every_s` with the
count since (the trainer adaptors' and the HTTP door's account of unscored completions)."""

from __future__ import annotations

import logging

import pytest

from gym_metrics._util.failure_log import FailureLog


def test_the_first_reason_then_one_line_a_period_with_the_count_since(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    failures = FailureLog("fn", every_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="gym_metrics.integrations"):
        assert not failures.note(0, 8, "")  # nothing failed: nothing said
        assert failures.note(2, 8, "row 3: no expected_answer")
        now[0] = 30
        assert not failures.note(5, 8, "later")
        now[0] = 61
        assert failures.note(1, 8, "again")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "fn: 2 of 8 completions could not be scored (2 since the last such line); first: row 3: no expected_answer",
        "fn: 1 of 8 completions could not be scored (6 since the last such line); first: again",
    ]
