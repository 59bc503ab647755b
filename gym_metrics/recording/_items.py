"""NeMo Gym 0.7.0's typed conversation items (`NeMoGymResponseInputItem`, openai_utils.py): the
fields of each kind in its model's order, and an item as its `TrajectoryRecord` dumps it, every
field present (null where the item has none) so a trajectory reads the same from either tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")
"""A training item's fields (its `...ForTraining` model puts them first)."""
ITEM_FIELDS: dict[str, tuple[str, ...]] = {
    "assistant": ("id", "content", "role", "status", "type", "phase"),  # a policy's answer message
    "input": ("content", "role", "type", "phase"),  # any other message without id or status
    "input_with_status": ("content", "role", "status", "type"),  # a user, system or developer one with a status
    "reasoning": ("id", "summary", "type", "encrypted_content", "content"),
    "function_call": ("arguments", "call_id", "name", "type", "id", "status", "namespace"),
    "function_call_output": ("call_id", "output", "type", "id", "status"),
}
PART_FIELDS: dict[str, tuple[str, ...]] = {
    "input_text": ("text", "type"),
    "output_text": ("annotations", "text", "type", "logprobs"),
    "refusal": ("refusal", "type"),
    "summary_text": ("text", "type"),
    "reasoning_text": ("text", "type"),
}
_PARTS = {"assistant": ("output_text", "refusal"), "reasoning": ("summary_text", "reasoning_text")}
"""The part kinds each item's lists may hold (`input_text` elsewhere)."""
_TRAINED = ("assistant", "reasoning", "function_call")
_ORDER = {
    (shape, trained): (*(TOKEN_FIELDS if trained else ()), *fields) for shape, fields in ITEM_FIELDS.items() for trained in (False, True)
}
"""Per (shape, carries token IDs): the dumped item's fields in order."""
_KNOWN = {key: frozenset(fields) for key, fields in _ORDER.items()}
_PART_KNOWN = {kind: frozenset(fields) for kind, fields in PART_FIELDS.items()}


def item_shape(item: Mapping[str, Any]) -> str | None:
    """Which of ITEM_FIELDS' models NeMo Gym reads the item as; None for another kind."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind != "message":
        return kind if kind in ("reasoning", "function_call", "function_call_output") else None
    if "id" in item:
        return "assistant" if item.get("role") == "assistant" else None
    if "status" in item:
        return "input_with_status" if item.get("role") in ("user", "system", "developer") else None
    return "input"


def as_dumped(item: Any) -> Any:
    """The item as NeMo Gym's typed model dumps it: its fields in the model's order, those it
    lacks null (`routed_experts` too beside token IDs), and its parts' likewise. An item NeMo
    Gym would refuse or drop a field of (an unknown field, kind or part) is returned as it is."""
    shape = item_shape(item) if isinstance(item, dict) else None
    if shape is None:
        return item
    model = (shape, shape in _TRAINED and "prompt_token_ids" in item)
    if not item.keys() <= _KNOWN[model]:
        return item
    out = {k: item.get(k) for k in _ORDER[model]}
    out["type"] = item.get("type", "message")
    for key in ("content", "summary", "output"):
        if isinstance(out.get(key), list):
            parts = [_part(p, _PARTS.get(shape, ("input_text",))) for p in out[key]]
            if None in parts:
                return item
            out[key] = parts
    return out


def _part(part: Any, kinds: tuple[str, ...]) -> dict[str, Any] | None:
    """The part in its model's order, or None when it is not one of `kinds` or has a field more."""
    if not isinstance(part, dict) or part.get("type") not in kinds:
        return None
    kind = part["type"]
    return {k: part.get(k) for k in PART_FIELDS[kind]} if part.keys() <= _PART_KNOWN[kind] else None
