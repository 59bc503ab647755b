"""The exact shape NeMo Gym 0.7.0's typed conversation items demand (`NeMoGymResponseInputItem`,
which its exporter validates every item against before converting): which content parts each
kind of item may hold, which ids must be strings, and which assistant messages it reads as a
model's answer. A row NeMo Gym's validation would refuse is refused here, naming the field.

An assistant message is an answer when its content is a list whose first part is `output_text`
or `refusal` (or an empty list beside a string id); any other assistant message is copied
context (a string, or input parts), which the export refuses. A message with no role at all
but an answer's content is an answer too (the model's role defaults to assistant), and NeMo
Gym's preflight, which checks messages by role, passes it by: fields it does not know, on the
message or on its parts, are left out rather than refused (`roleless_answers_read`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gym_metrics.recording._atif_json import AtifRefused

INPUT_PARTS = ("input_text", "input_image", "input_file", "input_video")
"""Parts a system, user, developer (or copied assistant) message may hold."""
TOOL_OUTPUT_PARTS = ("input_text", "input_image", "input_file")
"""Parts a function_call_output's list output may hold."""
ANSWER_PARTS = ("output_text", "refusal")
ITEM_STATUSES = ("in_progress", "completed", "incomplete")
_PHASES = (None, "commentary", "final_answer")
_ANSWER_FIELDS = ("id", "content", "role", "status", "type", "phase")
_ANSWER_PART_FIELDS = {"output_text": ("annotations", "text", "type", "logprobs"), "refusal": ("refusal", "type")}


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
        if copy and "status" in item and item["status"] not in ITEM_STATUSES:
            raise AtifRefused(f"{path}.status", f"expected {_one_of(ITEM_STATUSES)}, got {item['status']!r}")
        if item.get("phase") not in _PHASES:  # reached only without role: with one, any phase was refused
            raise AtifRefused(f"{path}.phase", f"expected commentary, final_answer or null, got {item['phase']!r}")
    elif kind == "message":
        role = str(item.get("role"))
        _parts(item.get("content"), INPUT_PARTS, f"{path}.content", f"{'an' if role == 'assistant' else 'a'} {role} message")
        if role in ("system", "user", "developer") and isinstance(item.get("content"), list) and isinstance(item.get("status"), (list, dict)):
            # any other status is ignored, but NeMo Gym's typed items cannot tell the model of this one (it looks it up in a set)
            raise AtifRefused(f"{path}.status", f"expected a scalar (any other status is ignored), got {type(item['status']).__name__}")
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


def _as_read(item: Any) -> Any:
    if not isinstance(item, dict) or item.get("type") != "message":
        return item
    if item.get("role") == "assistant" and is_answer(item) and "status" not in item:
        return {**item, "status": "completed"}
    if item.get("role") in ("system", "user", "developer") and "status" in item and item["status"] not in ITEM_STATUSES:
        return {k: v for k, v in item.items() if k != "status"}
    return item


def with_default_status(items: Any) -> Any:
    """A list of items with each answer lacking a status given NeMo Gym's default (completed),
    and each input message's status that is none of an item's three left out (NeMo Gym reads
    that message as one without status, the field ignored), so that a turn's copy and the
    conversation compare as NeMo Gym's validated copies do."""
    return [_as_read(i) for i in items] if isinstance(items, list) else items


def is_roleless_answer(item: Any) -> bool:
    """A message without a role whose content is an answer's (see the module docstring)."""
    return isinstance(item, dict) and item.get("type") == "message" and "role" not in item and is_answer(item)


def _answer_part(part: Any) -> Any:
    """A part of a role-less answer as NeMo Gym's model keeps it: its type (when absent, the one
    whose fields it has), and only that type's fields; any other part as it is (refused later)."""
    if not isinstance(part, dict):
        return part
    kind = part.get("type") if "type" in part else "output_text" if {"text", "annotations"} <= part.keys() else "refusal" if "refusal" in part else None
    if kind not in _ANSWER_PART_FIELDS:
        return part
    return {**{k: part[k] for k in _ANSWER_PART_FIELDS[kind] if k in part}, "type": kind}


def _read(items: Any) -> Any:
    if not isinstance(items, list) or not any(is_roleless_answer(i) for i in items):
        return items
    return [{**{k: i[k] for k in _ANSWER_FIELDS if k in i}, "role": "assistant", "content": [_answer_part(p) for p in i["content"]]}
            if is_roleless_answer(i) else i for i in items]  # fmt: skip


def roleless_answers_read(trajectory: dict[str, Any]) -> dict[str, Any]:
    """The trajectory with each role-less answer, in the conversation and in the turns' copies,
    as NeMo Gym reads it: an assistant answer with only the fields its model has (the rest left
    out, not refused); the trajectory itself when it has none (the usual case)."""
    invocations = [i for i in trajectory.get("invocations") or [] if isinstance(i, dict)]
    turns = [t for t in trajectory.get("turns") or [] if isinstance(t, dict)]
    lists = [i.get("conversation") for i in invocations] + [t.get(k) for t in turns for k in ("question", "answer", "reasoning_content")]
    if not any(_read(items) is not items for items in lists):
        return trajectory
    read = {**trajectory, "invocations": [{**i, "conversation": _read(i.get("conversation"))} if isinstance(i, dict) else i
                                          for i in trajectory["invocations"]]}  # fmt: skip
    if isinstance(trajectory.get("turns"), list):
        read["turns"] = [{**t, **{k: _read(t[k]) for k in ("question", "answer", "reasoning_content") if k in t}} if isinstance(t, dict) else t
                         for t in trajectory["turns"]]  # fmt: skip
    return read
