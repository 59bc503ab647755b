"""Turn one rollout row into what the report shows of it: the prompt messages, the turns in
order (reasoning, text, tool calls each matched to its output by call_id) and the final answer.

Reads the Responses API shape `collect` writes for an episode (`response.output` items of type
`message`, `reasoning`, `function_call`, `function_call_output`; the prompt in
`responses_create_params.input`), and a single-turn answer (`response.output_text`, a text
`response`, or a chat completion's first choice) as one turn. Every text is cut to TEXT_CHARS
and a trajectory to MAX_ITEMS items, so one row cannot blow up the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

TEXT_CHARS = 8000
"""A message, reasoning summary, tool arguments or tool output is shown cut to this."""
MAX_ITEMS = 200
"""Prompt messages and trajectory items shown per rollout (the page says when there are more)."""


@dataclass
class Message:
    """A prompt message (or a prompt item that is not a message, its type as the role)."""

    role: str
    text: str


@dataclass
class Call:
    """A tool call and, matched by call_id, its output (None: no output in the trajectory)."""

    name: str
    arguments: str
    call_id: str
    output: str | None = None
    error: bool = False


@dataclass
class Turn:
    """One policy turn: its reasoning summaries, its assistant text and its tool calls."""

    reasoning: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    outputs: list[Call] = field(default_factory=list)
    """Outputs whose call_id matches no call of the trajectory (shown on their own)."""
    others: list[Message] = field(default_factory=list)
    """Items of other types (a hosted tool's call, ...) as JSON, their type as the role: never
    the final answer."""


@dataclass
class EpisodeView:
    """What the report shows of one rollout row."""

    prompt: list[Message]
    tools: list[str]
    turns: list[Turn]
    final: str | None
    """The last turn's text when it made no tool call: the answer."""
    notes: list[str]
    """Why the rollout stopped or failed (incomplete, failure_reason, a collection error)."""
    cut: int = 0
    """Items left out past MAX_ITEMS."""


def cut(text: str, limit: int = TEXT_CHARS) -> str:
    """`text` cut to `limit` characters, the cut marked."""
    return text if len(text) <= limit else text[:limit] + f"\n… ({len(text) - limit:,} more characters)"


def as_text(value: Any) -> str:
    """A content value as text: a string, the text parts of a list, or compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_part_text(p) for p in value)
    return _json(value, indent=False)


def _part_text(part: Any) -> str:
    """One part of a content list: its text; a list in a list is JSON (never flattened level
    by level: a row nested 300 deep stopped the report)."""
    if isinstance(part, Mapping):
        for key in ("text", "refusal"):
            if isinstance(part.get(key), str):
                return str(part[key])
        return f"[{part.get('type', 'part')}]"
    if part is None or isinstance(part, str):
        return as_text(part)
    return _json(part, indent=False)


def _json(value: Any, indent: bool) -> str:
    """JSON text of `value`; indented unless that would more than double it (deep nesting)."""
    try:
        compact = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return repr(value)[:TEXT_CHARS]
    if not indent:
        return compact
    pretty = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS).decode()
    return pretty if len(pretty) <= 2 * len(compact) + 40 else compact


def pretty_arguments(arguments: Any) -> str:
    """Tool-call arguments pretty-printed when they are JSON text, else as they are."""
    if isinstance(arguments, str):
        try:
            return cut(_json(orjson.loads(arguments), indent=True))
        except orjson.JSONDecodeError:
            return cut(arguments)
    return cut(_json(arguments, indent=True))


def is_error(output: str) -> bool:
    """An output the environment or agent loop marks as failed: JSON `{"error": ...}`."""
    if not output.startswith("{") or '"error"' not in output:
        return False
    try:
        parsed = orjson.loads(output)
    except orjson.JSONDecodeError:
        return False
    return isinstance(parsed, dict) and parsed.get("error") not in (None, "", False)


def episode(row: Mapping[str, Any]) -> EpisodeView:
    """The prompt, turns and answer of one rollout row."""
    params = row.get("responses_create_params")
    params = params if isinstance(params, Mapping) else {}
    prompt = _prompt(params)
    given_tools = params.get("tools")
    tools = [_tool_name(t) for t in given_tools if isinstance(t, Mapping)] if isinstance(given_tools, list) else []
    response = row.get("response")
    items, final_text = _items(response)
    budget = max(0, MAX_ITEMS - len(prompt))
    turns = _turns(items[:budget])
    if final_text is not None and not items:
        turns = [Turn(texts=[cut(final_text)])]
    last = turns[-1] if turns else None
    final = "\n\n".join(last.texts) if last is not None and last.texts and not last.calls else None
    return EpisodeView(prompt[:MAX_ITEMS], tools, turns, final, _notes(row), max(0, len(prompt) - MAX_ITEMS) + max(0, len(items) - budget))


def _tool_name(tool: Mapping[str, Any]) -> str:
    fn = tool.get("function")  # a chat-completions tool: {"type": "function", "function": {...}}
    name = tool.get("name") or (fn.get("name") if isinstance(fn, Mapping) else None)
    return str(name or tool.get("type", "?"))


def _prompt(params: Mapping[str, Any]) -> list[Message]:
    out = []
    if isinstance(params.get("instructions"), str) and params["instructions"]:
        out.append(Message("system", cut(params["instructions"])))
    given = params.get("input")
    if isinstance(given, str):
        return out + [Message("user", cut(given))]
    for item in given if isinstance(given, list) else ():
        if not isinstance(item, Mapping):
            out.append(Message("item", cut(as_text(item))))
        elif "role" in item and item.get("type", "message") == "message":
            out.append(Message(str(item["role"]), cut(as_text(item.get("content")))))
        else:
            out.append(Message(str(item.get("type", "item")), cut(_json(item, indent=True))))
    return out


def _items(response: Any) -> tuple[list[Mapping[str, Any]], str | None]:
    """(the trajectory's items, or a single-turn text answer)."""
    if isinstance(response, str):
        return [], response
    if not isinstance(response, Mapping):
        return [], None
    output = response.get("output")
    if isinstance(output, list):
        return [i for i in output if isinstance(i, Mapping)], response.get("output_text") if isinstance(response.get("output_text"), str) else None
    if isinstance(response.get("output_text"), str):
        return [], str(response["output_text"])
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        return _chat_items(choices[0].get("message")), None
    return [], None


def _chat_items(message: Any) -> list[Mapping[str, Any]]:
    """A chat completion's message as Responses items (text, then its tool calls)."""
    if not isinstance(message, Mapping):
        return []
    items: list[Mapping[str, Any]] = []
    if isinstance(message.get("reasoning_content"), str):
        items.append({"type": "reasoning", "summary": [{"text": message["reasoning_content"]}]})
    if message.get("content"):
        items.append({"type": "message", "content": message["content"]})
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else [calls] if calls else ():
        if not isinstance(call, Mapping):  # shown as it is, under its key
            items.append({"type": "tool_calls", "value": call})
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, Mapping) else {"arguments": fn}
        items.append({"type": "function_call", "name": fn.get("name"), "arguments": fn.get("arguments"), "call_id": call.get("id")})
    return items


def _turns(items: list[Mapping[str, Any]]) -> list[Turn]:
    """Items grouped into turns: a turn ends where tool outputs give way to the policy again."""
    calls: dict[str, Call] = {}
    turns: list[Turn] = []
    after_output = True
    for item in items:
        kind = item.get("type", "message")
        if kind == "function_call_output":
            out = cut(as_text(item.get("output")))
            call = calls.get(str(item.get("call_id")))
            if call is None or call.output is not None:
                call = Call("(no matching call)", "", str(item.get("call_id")))
                (turns[-1] if turns else _new(turns)).outputs.append(call)
            call.output, call.error = out, is_error(out) or item.get("status") in ("failed", "incomplete")
            after_output = True
            continue
        turn = _new(turns) if after_output else turns[-1]
        after_output = False
        if kind == "reasoning":
            parts = item.get("summary") or item.get("content")
            turn.reasoning.append(cut(as_text(parts)))
        elif kind == "function_call":
            call = Call(str(item.get("name")), pretty_arguments(item.get("arguments")), str(item.get("call_id")))
            calls[call.call_id] = call
            turn.calls.append(call)
        elif kind == "message":
            turn.texts.append(cut(as_text(item.get("content"))))
        else:
            turn.others.append(Message(str(kind), cut(_json(item, indent=True))))
    return turns


def _new(turns: list[Turn]) -> Turn:
    turns.append(Turn())
    return turns[-1]


def _notes(row: Mapping[str, Any]) -> list[str]:
    notes = []
    response = row.get("response")
    if isinstance(response, Mapping) and response.get("status") == "incomplete":
        meta, details = response.get("metadata"), response.get("incomplete_details")
        reason = (meta.get("ng_termination_message") if isinstance(meta, Mapping) else None) or (
            details.get("reason") if isinstance(details, Mapping) else None
        )
        notes.append(cut(f"incomplete: {reason}" if reason else "incomplete", 500))
    for key in ("failure_kind", "failure_reason"):
        if row.get(key):
            notes.append(cut(f"{key}: {as_text(row[key])}", 500))
    error = row.get("_gm_error")
    if isinstance(error, Mapping):
        notes.append(cut(f"not verified ({error.get('kind', 'error')}): {error.get('message', '')}", 500))
    return notes
