"""The conversation items of a trajectory as ATIF holds them: the fields each item may carry
(anything else would be dropped, so it is refused, as NeMo Gym's preflight refuses it), and an
item's text, reasoning and call arguments as ATIF content."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gym_metrics.recording._atif_json import AtifRefused, strict_json_loads
from gym_metrics.recording._atif_shapes import is_answer, is_roleless_answer
from gym_metrics.recording._items import ITEM_FIELDS, PART_FIELDS, TOKEN_FIELDS

_ITEM_FIELDS = {shape: set(fields) for shape, fields in ITEM_FIELDS.items() if shape != "input_with_status"}
_ITEM_FIELDS["input"] |= set(ITEM_FIELDS["input_with_status"])
"""The fields each conversation item may carry; anything else would be dropped, so it is refused."""
_PART_FIELDS = {kind: set(fields) for kind, fields in PART_FIELDS.items() if kind != "refusal"}


def fields_known(item: Mapping[str, Any], allowed: Iterable[str], path: str) -> None:
    unknown = sorted(repr(k) for k in item if k not in allowed)
    if unknown:
        raise AtifRefused(path, f"unsupported fields would be dropped: {', '.join(unknown)}")


def refs_known(refs: Any, path: str, index: bool = True) -> None:
    """Refuses a `model_ref` with fields besides type and name (the export would drop them)."""
    for i, ref in enumerate(refs if isinstance(refs, list) else ()):
        model_ref = ref.get("model_ref") if isinstance(ref, dict) else None
        if isinstance(model_ref, dict):
            fields_known(model_ref, ("type", "name"), f"{path}[{i}].model_ref" if index else f"{path}.model_ref")


def _parts_known(parts: Any, path: str) -> None:
    for i, part in enumerate(parts if isinstance(parts, list) else ()):
        if isinstance(part, dict):
            kind = part.get("type")
            if not isinstance(kind, str) or not kind.strip():
                raise AtifRefused(f"{path}[{i}].type", "expected a non-empty supported content-part type")
            if kind in _PART_FIELDS:
                fields_known(part, _PART_FIELDS[kind], f"{path}[{i}]")


def item_kind(item: Mapping[str, Any]) -> str:
    """assistant (a model's answer message, as NeMo Gym tells one: `is_answer`), copied (any
    other assistant message, context given as input),
    input (system, user, developer), reasoning, function_call, function_call_output."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        if item.get("role") == "assistant":
            return "assistant" if is_answer(item) else "copied"
        return "input"
    return str(kind)


def check_items(items: Any, path: str, lenient: bool) -> None:
    """Refuses an item whose fields the export would drop (NeMo Gym's preflight)."""
    for i, item in enumerate(items if isinstance(items, list) else ()):
        where = f"{path}[{i}]"
        if not isinstance(item, dict):
            continue
        tokens = sorted(set(TOKEN_FIELDS).intersection(item))
        if tokens and not lenient:
            raise AtifRefused(where, "training token IDs, log probabilities, and routed-expert metadata are outside the "
                              f"initial ATIF export profile (found: {', '.join(tokens)})")  # fmt: skip
        kind = item.get("type")
        if not isinstance(kind, str) or not kind.strip():
            raise AtifRefused(f"{where}.type", "expected a non-empty supported conversation item type")
        if kind not in ("message", "reasoning", "function_call", "function_call_output"):
            raise AtifRefused(f"{where}.type", f"unsupported conversation item type {kind!r}")
        if is_roleless_answer(item):  # read as NeMo Gym's model reads it (_atif_shapes.roleless_answers_read), not checked here
            continue
        if kind == "message" and item.get("role") not in ("assistant", "system", "user", "developer"):
            raise AtifRefused(f"{where}.role", f"unsupported message role {item.get('role')!r}")
        shape = {"message": "assistant" if item.get("role") == "assistant" else "input"}.get(kind, kind)
        fields_known(item, _ITEM_FIELDS[shape] | (set(TOKEN_FIELDS) if shape != "function_call_output" else set()), where)
        if item.get("phase") is not None:
            raise AtifRefused(f"{where}.phase", "Responses message phase is not representable in ATIF v1.7")
        if shape == "input" and "status" in item and not isinstance(item.get("content"), list):
            raise AtifRefused(f"{where}.status", "source-message status is only supported with multipart content")
        if kind == "function_call" and item.get("namespace") is not None:
            raise AtifRefused(f"{where}.namespace", "namespaced Responses function calls are not representable in ATIF v1.7")
        for key in ("content", "summary", "output"):
            _parts_known(item.get(key), f"{where}.{key}")


def text_content(content: Any, path: str) -> str | list[dict[str, Any]]:
    """A message's content as ATIF content: a string, or text parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list) or not content:
        raise AtifRefused(path, "expected non-empty scalar or multipart text content")
    parts = []
    for i, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "output_text", "text"):
            raise AtifRefused(f"{path}[{i}]", "only text content parts are supported")
        if not isinstance(part.get("text"), str):
            raise AtifRefused(f"{path}[{i}].text", "expected a string")
        if part.get("annotations") not in (None, []) or part.get("logprobs") not in (None, []):
            raise AtifRefused(f"{path}[{i}]", "annotations and log probabilities are not representable")
        parts.append({"type": "text", "text": part["text"]})
    return parts


def message_content(item: Mapping[str, Any], path: str, assistant: bool) -> str | list[dict[str, Any]]:
    """An answer's or an input message's content; an answer without status is complete (NeMo
    Gym's default), and an input message's status counts only when it is one of the three an
    item has (any other is no field of the model NeMo Gym reads the message as: ignored)."""
    status = item.get("status", "completed")
    if status != "completed" and (assistant or status in ("in_progress", "incomplete")):
        raise AtifRefused(f"{path}.status", f"expected completed, got {status!r}")
    if assistant and not item.get("content"):
        raise AtifRefused(f"{path}.content", "expected at least one output_text part")
    return text_content(item.get("content"), f"{path}.content")


def reasoning_text(items: Sequence[Mapping[str, Any]], path: str) -> str | None:
    """The reasoning before an answer as one text (ATIF has one `reasoning_content` per step)."""
    if not items:
        return None
    segments = []
    for i, item in enumerate(items):
        content, summary = item.get("content") or [], item.get("summary") or []
        if item.get("encrypted_content") is not None:
            raise AtifRefused(f"{path}[{i}]", "encrypted reasoning is not supported")
        if content and summary:
            raise AtifRefused(f"{path}[{i}]", "reasoning with both content and summary cannot be represented without dropping one")
        if not (content or summary):
            raise AtifRefused(f"{path}[{i}]", "encrypted or empty reasoning cannot be represented as ATIF text")
        for j, segment in enumerate(content or summary):
            text = segment.get("text") if isinstance(segment, dict) else None
            if not isinstance(text, str):
                raise AtifRefused(f"{path}[{i}][{j}]", "reasoning segment does not contain text")
            segments.append(text)
    if len(segments) != 1:
        raise AtifRefused(path, "multiple reasoning segments cannot be represented without changing boundaries")
    return segments[0]


def arguments_of(call: Mapping[str, Any], path: str) -> dict[str, Any]:
    try:
        arguments = strict_json_loads(call.get("arguments"))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise AtifRefused(f"{path}.arguments", "expected a JSON object string") from None
    if not isinstance(arguments, dict):
        raise AtifRefused(f"{path}.arguments", "expected a JSON object")
    return arguments
