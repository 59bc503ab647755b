"""topic_adherence makes one judge call per topic the judge lists: `max_topics` bounds that
(a judge listing 2,000 topics made 2,002 calls for one row)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gym_metrics.scorers import RowError
from gym_metrics.scorers.judge import TopicAdherence
from gym_metrics.testing import ScriptedJudge

ROW = {"user_input": [{"type": "human", "content": "hi"}, {"type": "ai", "content": "hello"}], "reference_topics": ["greeting"]}


def judge_of(n: int):  # type: ignore[no-untyped-def]
    """Lists `n` topics, answers every one, puts each on the reference topics."""

    def respond(body: dict[str, Any]) -> str:
        prompt = body["messages"][-1]["content"].split("=== Now the real input ===")[-1]
        if "### Topic\n" in prompt:
            return json.dumps({"refused_to_answer": False})
        if "### Reference topics" in prompt:
            return json.dumps({"classifications": [True] * n})
        return json.dumps({"topics": [f"t{i}" for i in range(n)]})

    return respond


async def score(judge: ScriptedJudge, **options: Any) -> dict[str, float]:
    metric = TopicAdherence({"url": judge.url, "model": "m", **options})
    try:
        return await metric.score(ROW)
    finally:
        await metric.aclose()


async def test_more_topics_than_max_topics_is_a_row_error_after_one_call() -> None:
    with ScriptedJudge(default=judge_of(200)) as judge:
        with pytest.raises(RowError) as info:
            await score(judge)
    assert info.value.field == "judge_reply"
    assert info.value.reason.startswith("topic list: 200 topics, more than max_topics (50)")
    assert len(judge.requests) == 1  # the extraction only: no per-topic call


async def test_max_topics_is_inclusive_and_configurable() -> None:
    with ScriptedJudge(default=judge_of(3)) as judge:
        assert (await score(judge, max_topics=3))["topic_adherence_f1"] == pytest.approx(1.0)
    assert len(judge.requests) == 1 + 3 + 1
    with ScriptedJudge(default=judge_of(3)) as judge:
        with pytest.raises(RowError, match=r"3 topics, more than max_topics \(2\)"):
            await score(judge, max_topics=2)
