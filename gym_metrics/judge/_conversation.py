"""Multi-turn rows (RAGAS `MultiTurnSample.user_input`) checked and rendered as judge text.

A message is `{"type": "human" | "ai" | "tool", "content": str, "tool_calls": [{"name", "args"}]}`.
The rendering is the transcript RAGAS shows its judge ("Human: ...", "AI: ...", "Tools:" with
one `name: {args}` line per call, "ToolOutput: ..."), so prompts see what RAGAS's see. Rows
RAGAS refuses (unknown type, non-string content, args not an object, a tool message not
answering an AI tool call) are a RowError naming the message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gym_metrics.evaluate import RowError

_PREFIX = {"human": "Human", "tool": "ToolOutput"}


def render_conversation(row: Mapping[str, Any], field: str = "user_input") -> str:
    """The transcript of `row[field]`, one line (or block) per message."""
    messages = row.get(field)
    if not isinstance(messages, list) or not messages:
        raise RowError(field, "must be a non-empty list of messages")
    lines: list[str] = []
    previous: str | None = None
    seen_ai = False
    for i, message in enumerate(messages):
        where = f"{field}[{i}]"
        if not isinstance(message, Mapping):
            raise RowError(where, f"must be a message object, got {type(message).__name__}")
        kind = message.get("type")
        content = message.get("content")
        if kind not in ("human", "ai", "tool"):
            raise RowError(f"{where}.type", f"must be 'human', 'ai' or 'tool', got {kind!r}")
        if not isinstance(content, str):
            raise RowError(f"{where}.content", f"must be a string, got {type(content).__name__}")
        if kind == "ai":
            seen_ai = True
            calls = _tool_calls(message.get("tool_calls"), f"{where}.tool_calls")
            block = [f"AI: {content}"] if content != "" else []
            if calls is not None:
                block.append("Tools:")
                block.extend(f"  {name}: {args!r}" for name, args in calls)
            lines.append("\n".join(block))
            previous = "ai_with_tools" if calls else "ai"
            continue
        if kind == "tool":
            if not seen_ai:
                raise RowError(where, "a tool message must come after an AI message")
            if previous not in ("ai_with_tools", "tool"):
                raise RowError(where, "a tool message must follow an AI message that called tools, or another tool message")
        lines.append(f"{_PREFIX[kind]}: {content}")
        previous = kind
    return "\n".join(lines)


def _tool_calls(value: Any, where: str) -> list[tuple[str, dict[str, Any]]] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise RowError(where, f"must be a list, got {type(value).__name__}")
    calls = []
    for j, call in enumerate(value):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise RowError(f"{where}[{j}]", "must be an object with a string 'name'")
        args = call.get("args", {})
        if not isinstance(args, Mapping):
            raise RowError(f"{where}[{j}].args", f"must be an object, got {type(args).__name__}")
        calls.append((call["name"], dict(args)))
    return calls


def text_field(row: Mapping[str, Any], *names: str) -> str:
    """The first of `names` present in the row, which must be a string."""
    for name in names:
        if name in row and row[name] is not None:
            value = row[name]
            if not isinstance(value, str):
                raise RowError(name, f"must be a string, got {type(value).__name__}")
            return value
    raise RowError(names[0], "missing" + (f" (also accepted: {', '.join(names[1:])})" if len(names) > 1 else ""))
