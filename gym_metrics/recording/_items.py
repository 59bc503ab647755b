"""NeMo Gym 0.7.0's typed conversation items (`NeMoGymResponseInputItem`, openai_utils.py): the
fields of each kind in its model's order, and an item as its `TrajectoryRecord` dumps it, every
field present (null where the item has none) so a trajectory reads the same from either tool."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

from gym_metrics.recording._conversation_items import ConversationItem
from gym_metrics.recording._sdk_items import WholeItem

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
_ADAPTER: TypeAdapter[Any] = TypeAdapter(ConversationItem)


def as_dumped(item: Any) -> Any:
    """The item as NeMo Gym's `TrajectoryRecord` dumps it: validated as its typed union routes it
    (recording/_conversation_items.py: a message by role, content and status, an untyped one by
    its fields, to an MCP tool listing when nothing fits) and dumped as JSON, every field of the
    model in its order, those the item lacks null or defaulted, values coerced as the model reads
    them. An item NeMo Gym would refuse, or would drop a field of (its own or a content part's),
    or of a kind whose SDK model is not installed, is returned as it is."""
    try:
        model = _ADAPTER.validate_python(item)
    except (TypeError, ValueError):  # ValidationError, or routing met an unhashable role or status
        return item
    if isinstance(model, WholeItem):
        return item
    dumped = model.model_dump(mode="json")
    return item if _loses_a_field(item, dumped) else dumped


def _loses_a_field(item: Mapping[str, Any], dumped: Mapping[str, Any]) -> bool:
    """The dump lacks a field of the item, or of one of its content, summary or output parts."""
    if not item.keys() <= dumped.keys():
        return True
    lists = [(item[k], dumped[k]) for k in ("content", "summary", "output") if isinstance(item.get(k), list)]
    return any(isinstance(p, dict) and isinstance(d, dict) and not p.keys() <= d.keys() for given, kept in lists for p, d in zip(given, kept))
