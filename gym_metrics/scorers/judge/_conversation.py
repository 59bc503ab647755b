"""Multi-turn rows (RAGAS `MultiTurnSample.user_input`) checked and rendered as judge text.

A message is `{"type": "human" | "ai" | "tool", "content": str, "tool_calls": [{"name", "args"}]}`.
The rendering is the transcript RAGAS shows its judge ("Human: ...", "AI: ...", "Tools:" with
one `name: {args}` line per call, "ToolOutput: ..."), so prompts see what RAGAS's see. Rows
RAGAS refuses are a RowError naming the message, by the same checks as tool call accuracy
(`gym_metrics.scorers.tool_calls.predicted_calls`: RAGAS's `MultiTurnSample` types and order rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gym_metrics.scorers.tool_calls import check_sample_fields, predicted_calls
from gym_metrics.scorers import RowError

_PREFIX = {"human": "Human", "tool": "ToolOutput"}


def render_conversation(row: Mapping[str, Any], field: str = "user_input") -> str:
    """The transcript of `row[field]`, one line (or block) per message."""
    messages = row.get(field)
    if not isinstance(messages, list) or not messages:
        raise RowError(field, "must be a non-empty list of messages")
    predicted_calls(messages, field)  # RowError for a list RAGAS refuses
    check_sample_fields(row)  # and for the row's other MultiTurnSample fields
    lines: list[str] = []
    for message in messages:
        kind, content = message["type"], message["content"]
        if kind == "ai":
            calls = message.get("tool_calls")
            block = [f"AI: {content}"] if content != "" else []
            if calls is not None:
                block.append("Tools:")
                block.extend(f"  {call['name']}: {dict(call['args'])!r}" for call in calls)
            lines.append("\n".join(block))
        else:
            lines.append(f"{_PREFIX[kind]}: {content}")
    return "\n".join(lines)


def text_field(row: Mapping[str, Any], *names: str) -> str:
    """The first of `names` present in the row, which must be a string."""
    for name in names:
        if name in row and row[name] is not None:
            value = row[name]
            if not isinstance(value, str):
                raise RowError(name, f"must be a string, got {type(value).__name__}")
            return value
    raise RowError(names[0], "missing" + (f" (also accepted: {', '.join(names[1:])})" if len(names) > 1 else ""))
