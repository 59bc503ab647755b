"""The typed Responses models of `gym_metrics.nemo_gym.openai_utils` pick the same models as
openai's own unions, by tag instead of by trying every member."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from openai.types.responses import Response, Tool

from gym_metrics.nemo_gym.openai_utils import NeMoGymResponse, NeMoGymTool

FUNCTION = {"type": "function", "name": "f", "parameters": {"type": "object", "properties": {}}, "strict": True}
TOOLS: list[dict[str, Any]] = [
    FUNCTION,
    {"type": "web_search"},
    {"type": "web_search_2025_08_26"},
    {"type": "file_search", "vector_store_ids": ["vs_1"]},
    {"type": "mcp", "server_label": "docs", "server_url": "https://example.invalid"},
    {"type": "custom", "name": "grammar"},
    {"type": "local_shell"},
]


def response(tools: list[Any]) -> dict[str, Any]:
    return {
        "id": "resp_1", "created_at": 0.0, "model": "m", "object": "response", "output": [],
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": tools,
    }  # fmt: skip


@pytest.mark.parametrize("tool", TOOLS, ids=[t["type"] for t in TOOLS])
def test_each_tool_is_the_model_openai_picks(tool: dict[str, Any]) -> None:
    ours = pydantic.TypeAdapter(NeMoGymTool).validate_python(tool)
    theirs = pydantic.TypeAdapter(Tool).validate_python(tool)
    assert type(ours) is type(theirs)
    assert ours == theirs
    parsed = NeMoGymResponse.model_validate_json(Response.model_validate(response([tool])).model_dump_json())
    assert type(parsed.tools[0]) is type(theirs)


@pytest.mark.parametrize(
    "tool",
    [{"type": "no_such_tool"}, {"name": "f"}, {"type": "function"}, "function", {"type": "function", "name": 3}],
    ids=["unknown type", "no type", "missing field", "not an object", "wrong field type"],
)
def test_a_tool_openai_refuses_is_refused(tool: Any) -> None:
    with pytest.raises(pydantic.ValidationError):
        pydantic.TypeAdapter(Tool).validate_python(tool)
    with pytest.raises(pydantic.ValidationError) as caught:
        NeMoGymResponse.model_validate(response([tool]))
    assert caught.value.errors()[0]["loc"][:2] == ("tools", 0)


def test_tool_models_round_trip_through_the_dump_and_revalidation_idiom() -> None:
    """`Response(**body.model_dump(), ...)`: dumped tools come back as the same models."""
    parsed = NeMoGymResponse.model_validate(response(TOOLS))
    again = NeMoGymResponse(**parsed.model_dump())
    assert [type(t) for t in again.tools] == [type(t) for t in parsed.tools]
    assert again == parsed
    rebuilt = NeMoGymResponse.model_validate(response(list(parsed.tools)))  # model instances in
    assert rebuilt.tools == parsed.tools
