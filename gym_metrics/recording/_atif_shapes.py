"""The exact shape NeMo Gym 0.7.0's typed conversation items demand (`NeMoGymResponseInputItem`,
which its exporter validates every item against before converting): which content parts each
kind of item may hold, which ids must be strings, and which assistant messages it reads as a
model's answer. A row NeMo Gym's validation would refuse is refused here, naming the field.

An assistant message is an answer when its content is a list whose first part is `output_text`
or `refusal` (or an empty list beside a string id); any other assistant message is copied
context (a string, or input parts), which the export refuses."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gym_metrics.recording._atif_json import AtifRefused

INPUT_PARTS = ("input_text", "input_image", "input_file", "input_video")
"""Parts a system, user, developer (or copied assistant) message may hold."""
TOOL_OUTPUT_PARTS = ("input_text", "input_image", "input_file")
"""Parts a function_call_output's list output may hold."""
ANSWER_PARTS = ("output_text", "refusal")
_STATUSES = ("in_progress", "completed", "incomplete")


def is_answer(item: Mapping[str, Any]) -> bool:
    """Whether an assistant message is read as a model's answer (see the module docstring)."""
    content = item.get("content")
    if not isinstance(content, list):
        return False
    if not content:
        return isinstance(item.get("id"), str)
    first = content[0]
    return isinstance(first, dict) and first.get("type") in ANSWER_PARTS


def _one_of(kinds: tuple[str, ...]) -> str:
    return f"{', '.join(kinds[:-1])} or {kinds[-1]}" if len(kinds) > 1 else kinds[0]


def _parts(parts: Any, kinds: tuple[str, ...], path: str, where: str) -> None:
    """Each object part's type is one of `kinds` (parts that are no objects are refused later,
    where the content is read)."""
    for i, part in enumerate(parts if isinstance(parts, list) else ()):
        if isinstance(part, dict) and part.get("type") not in kinds:
            raise AtifRefused(f"{path}[{i}].type", f"{where} holds only {_one_of(kinds)} parts, got {part.get('type')!r}")


def _what(value: Any) -> str:
    """A value as a refusal names it: a scalar as written, anything else by its type."""
    return repr(value) if value is None or isinstance(value, (bool, int, float)) else type(value).__name__


def _id(item: Mapping[str, Any], path: str, required: bool) -> None:
    value = item.get("id")
    if (required or value is not None) and not isinstance(value, str):
        raise AtifRefused(f"{path}.id", f"expected a string, got {_what(value)}" if "id" in item else "missing (a string is required)")


def check_shape(item: Any, path: str, copy: bool = False) -> None:
    """Refuses a conversation item (at `path`) whose shape NeMo Gym's typed items refuse. `copy`:
    a turn's copy, whose answer status must also be one NeMo Gym names (null is not one; in the
    conversation a null status is refused where the answer is read)."""
    if not isinstance(item, dict):
        return
    kind = item.get("type")
    if kind == "message" and item.get("role") == "assistant" and is_answer(item):
        _id(item, path, required=True)
        _parts(item.get("content"), ANSWER_PARTS, f"{path}.content", "an assistant answer")
        for i, part in enumerate(item["content"]):
            if isinstance(part, dict) and part.get("type") == "output_text" and not isinstance(part.get("annotations"), list):
                raise AtifRefused(f"{path}.content[{i}].annotations", "expected a list (an output_text part requires one)")
        if copy and "status" in item and item["status"] not in _STATUSES:
            raise AtifRefused(f"{path}.status", f"expected {_one_of(_STATUSES)}, got {item['status']!r}")
    elif kind == "message":
        role = str(item.get("role"))
        _parts(item.get("content"), INPUT_PARTS, f"{path}.content", f"{'an' if role == 'assistant' else 'a'} {role} message")
    elif kind == "reasoning":
        _id(item, path, required=True)
        if not isinstance(item.get("summary"), list):
            raise AtifRefused(f"{path}.summary", f"expected a list, got {_what(item.get('summary'))}")
        _parts(item["summary"], ("summary_text",), f"{path}.summary", "a reasoning summary")
        if item.get("content") is not None and not isinstance(item["content"], list):
            raise AtifRefused(f"{path}.content", f"expected a list or null, got {_what(item['content'])}")
        _parts(item.get("content"), ("reasoning_text",), f"{path}.content", "a reasoning content list")
    elif kind == "function_call_output":
        _id(item, path, required=False)
        _parts(item.get("output"), TOOL_OUTPUT_PARTS, f"{path}.output", "a tool result")
    elif kind == "function_call":
        _id(item, path, required=False)


def check_shapes(items: Any, path: str, copy: bool = False) -> None:
    for i, item in enumerate(items if isinstance(items, list) else ()):
        check_shape(item, f"{path}[{i}]", copy)


def with_default_status(items: Any) -> Any:
    """A list of items with each answer lacking a status given NeMo Gym's default (completed),
    so that a turn's copy and the conversation compare as NeMo Gym's validated copies do."""
    if not isinstance(items, list):
        return items
    return [{**i, "status": "completed"} if isinstance(i, dict) and i.get("type") == "message" and i.get("role") == "assistant"
            and is_answer(i) and "status" not in i else i for i in items]  # fmt: skip
