"""Reading the JSON in a judge's reply: the answers of chatty replies, a bounded number of decode
attempts on a reply made of brackets (it was quadratic: 300 KB took 30 s of CPU on the event
loop), and a reply nested past the parser's stack as a judge_reply error, not a crash."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gym_metrics.scorers import RowError
from gym_metrics.scorers.judge import AgentGoalAccuracy, TopicAdherence
from gym_metrics.scorers.judge._parse import ReplyFormatError, extract_json
from gym_metrics.testing import ScriptedJudge

pytestmark = pytest.mark.every_python  # (see pyproject: what differs between CPython versions)

ROW = {
    "user_input": [{"type": "human", "content": "hi"}, {"type": "ai", "content": "hello"}],
    "reference_topics": ["greeting"],
    "reference": "greeted",
}


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every JSON decode's start (json.loads goes through raw_decode too)."""
    calls: list[int] = []
    real = json.JSONDecoder.raw_decode

    def counting(self: json.JSONDecoder, s: str, idx: int = 0) -> tuple[Any, int]:
        calls.append(idx)
        return real(self, s, idx)

    monkeypatch.setattr(json.JSONDecoder, "raw_decode", counting)
    return calls


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"verdict": "1"}', {"verdict": "1"}),
        ('Sure!\n```json\n{"topics": ["a"]}\n```\nDone.', {"topics": ["a"]}),
        ('Here {name} goes [see above]: {"verdict": "0", "reason": "a {brace} in a string"} bye', {"verdict": "0", "reason": "a {brace} in a string"}),
        ('{not json} then [1, 2] and {"a": 1}', [1, 2]),
        ('prefix [ {"a": [true, null]} ] suffix', [{"a": [True, None]}]),
        ('{"a": 1 broken {"b": {}}', {"b": {}}),
        ("[ [1] x", [1]),
    ],
)
def test_chatty_replies_give_the_first_json_document(reply: str, expected: Any) -> None:
    assert extract_json(reply) == expected


@pytest.mark.parametrize("reply", ["{" * 20_000, ("[" * 40 + "0 ") * 500, "[" * 20_000])
def test_a_reply_of_brackets_costs_a_bounded_number_of_decodes(reply: str, decodes: list[int]) -> None:
    with pytest.raises(ReplyFormatError):
        extract_json(reply)
    assert len(decodes) <= 101  # the whole text, then at most 100 places (it was one per bracket)


async def _row_error(metric: Any) -> RowError:
    """The RowError scoring ROW raises (the metric closed after)."""
    try:
        with pytest.raises(RowError) as info:
            await metric.score(ROW)
    finally:
        await metric.aclose()
    return info.value


async def test_a_huge_reply_of_braces_is_a_judge_reply_error_quickly(decodes: list[int]) -> None:
    with ScriptedJudge(["{" * 200_000] * 2) as judge:
        failure = await _row_error(AgentGoalAccuracy({"url": judge.url, "model": "m"}))
    assert failure.field == "judge_reply"
    assert failure.reason.startswith("goal and end state: no JSON object in the reply; reply: '{{{")
    assert len(decodes) <= 2 * 101


@pytest.mark.parametrize("scorer", [TopicAdherence, AgentGoalAccuracy])
async def test_a_reply_nested_too_deep_is_a_judge_reply_error_after_the_fix_request(scorer: Any) -> None:
    with ScriptedJudge(["[" * 100_000, "[" * 100_000]) as judge:  # past every Python's parser stack (3.13 reads 5,000 levels)
        failure = await _row_error(scorer({"url": judge.url, "model": "m"}))
    assert failure.field == "judge_reply"
    assert "nested too deep to read" in failure.reason
    assert failure.reason.endswith("; reply: '" + "[" * 200 + "...'")
    assert len(judge.requests) == 2  # format_retries=1: sent back once
