"""Remote body templates render as NeMo Evaluator SDK's `render_template` does: over the row's
columns by name as well as `item`, and a `tojson` template read back as JSON (it was sent as a
JSON string, and `{{ question }}` was an undefined name while the error listed `question`)."""

from __future__ import annotations

from typing import Any

import pytest

from gym_metrics.scorers import RowError, get_scorer
from gym_metrics.testing import Reply, ScriptedJudge

ROW = {"question": "2+2?", "tags": ["math", "<easy>"], "meta": {"id": 7}, "a b": 1, "item": "shadowed"}
ANSWER = Reply(200, '{"score": 1}', {"Content-Type": "application/json"})


async def sent(body: dict[str, Any], row: dict[str, Any] = ROW) -> Any:
    with ScriptedJudge([ANSWER]) as server:
        metric = get_scorer("remote", {"url": f"{server.url}/chat/completions", "body": body, "scores": [{"name": "score"}]})
        try:
            await metric.score(row)
        finally:
            await metric.aclose()
    return server.requests[0].body


async def test_tojson_and_top_level_columns_render_as_the_sdk_does() -> None:
    body = {
        "tags": "{{ item.tags | tojson }}",
        "meta": "{{ meta|tojson }}",
        "q": "{{ question }}",
        "text": "Q: {{ question }} ({{ tags|length }})",
        "mixed": '{"t": {{ tags | tojson }}, "n": {{ meta.id }}}',
        "spaced": "{{ item['a b'] }}",
        "item_wins": "{{ item.question }}",
    }
    # what the SDK's render_template gives over {**row, "item": row} (checked with nemo-platform 0.3.0)
    assert await sent(body) == {
        "tags": ["math", "<easy>"], "meta": {"id": 7}, "q": "2+2?", "text": "Q: 2+2? (2)",
        "mixed": {"t": ["math", "<easy>"], "n": 7}, "spaced": 1, "item_wins": "2+2?",
    }


async def test_a_tojson_template_whose_output_is_not_json_is_a_row_error() -> None:
    with pytest.raises(RowError) as info:
        await sent({"x": "tags: {{ tags | tojson }}"})
    assert info.value.field == "body.x"
    assert info.value.reason.startswith("the template uses tojson, so its output is read as JSON")


async def test_an_undefined_name_lists_columns_that_are_really_undefined() -> None:
    with pytest.raises(RowError) as info:
        await sent({"x": "{{ answer }}"})
    assert "'answer' is undefined" in info.value.reason and "question" in info.value.reason
