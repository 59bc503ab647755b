"""The remote scorers' request body is JSON as NeMo Evaluator's httpx `json=` writes it: an
integer past 64 bits is sent exactly (orjson refused it), and a NaN is a row error saying so
(orjson sent it as `null`, silently changing the row)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from gym_metrics.evaluation import evaluate_async
from gym_metrics.scorers import RowError, get_scorer
from gym_metrics.testing import Reply, ScriptedJudge

pytestmark = pytest.mark.every_python  # (see pyproject: what differs between CPython versions)

BIG = 123456789012345678901234567890
ANSWER = Reply(200, '{"result": {"score": 1}, "score": 1}', {"Content-Type": "application/json"})


def configs(judge: ScriptedJudge) -> list[tuple[str, dict[str, Any]]]:
    url = f"{judge.url}/chat/completions"  # the scripted server's route
    return [
        ("nemo-agent-toolkit-remote", {"url": url, "evaluator_name": "score"}),
        ("remote", {"url": url, "body": {"x": "{{ item.x }}"}, "scores": [{"name": "score"}]}),
    ]


@pytest.mark.parametrize("which", [0, 1])
async def test_a_big_integer_is_sent_exactly_and_a_nan_is_a_row_error(which: int) -> None:
    rows = [{"id": 1, "x": BIG}, {"id": 2, "x": math.nan}, {"id": 3, "x": -math.inf}, {"id": 4, "x": 1.5}]
    with ScriptedJudge(default=ANSWER) as judge:
        name, config = configs(judge)[which]
        result = await evaluate_async(get_scorer(name, config), rows)
    sent = [r.body for r in judge.requests]
    xs = [(b.get("item") or b)["x"] for b in sent]
    assert sorted(xs) == [1.5, BIG]  # the big integer as written; NaN and -inf never sent (rows run concurrently)
    assert sorted(result.errors) == [1, 2]
    for index in (1, 2):
        failure = result.errors[index]
        assert failure.field == "body"
        assert "NaN or infinity" in failure.reason


async def test_the_body_is_the_sdks_bytes() -> None:
    with ScriptedJudge(default=ANSWER) as judge:
        name, config = configs(judge)[1]
        metric = get_scorer(name, {**config, "body": {"x": "{{ item.x }}", "s": "é {{ item.id }}"}})
        try:
            await metric.score({"x": BIG, "id": 7})
        finally:
            await metric.aclose()
    expected = json.dumps({"x": BIG, "s": "é 7"}, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert judge.requests[0].header("Content-Length") == str(len(expected.encode()))
    assert judge.requests[0].body == json.loads(expected)


async def test_a_body_nested_too_deep_is_a_body_error() -> None:
    deep: Any = 0
    for _ in range(100_000):  # past every Python's encoder stack (3.13 writes 5,000 levels)
        deep = [deep]
    with ScriptedJudge(default=ANSWER) as judge:
        metric = get_scorer("nemo-agent-toolkit-remote", {"url": f"{judge.url}/chat/completions", "evaluator_name": "score"})
        try:
            with pytest.raises(RowError) as info:
                await metric.score({"x": deep})
        finally:
            await metric.aclose()
    assert info.value.field == "body" and "nested too deep" in info.value.reason
    assert judge.requests == []
