"""What a generation becomes in the row a scorer reads, and in the result's `generated` entry.

NeMo Evaluator's rule: the generated output supersedes the row's `response`, as the answer
text with its reasoning part removed. Scorers that read a conversation (RAGAS messages
`{type: human|ai|tool, content, tool_calls: [{name, args}]}`) also get the generated turn
appended to `user_input`; `tool_calling`, which reads a chat-completions `response`, gets one.
A multi-turn episode (a response with `function_call_output` items: evaluate's agent loop)
appends every turn in order: each assistant turn with its calls, then a `tool` message per
call output.
Tool-call arguments are parsed as rows are (Python's json values: big integers stay exact),
because tool call accuracy compares their `str()`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from gym_metrics._util.jsonio import loads
from gym_metrics.scorers import RowError, Scorer
from gym_metrics.targets import Generation

Shape = Literal["text", "conversation", "chat"]

CONVERSATION_SCORERS: Final = frozenset({"tool_call_accuracy", "topic_adherence", "agent_goal_accuracy"})
"""Built-in scorers reading `user_input` as a conversation: the generated turn is appended."""
CHAT_RESPONSE_SCORERS: Final = frozenset({"tool_calling"})
"""Built-in scorers reading `response` as a chat completion."""
_ROLES: Final = {"human": "user", "ai": "assistant", "tool": "tool"}


def response_shape(metric: Scorer) -> Shape:
    """How `metric` reads the generation: a scorer class may say so itself with
    `online_input = "conversation" | "chat" | "text"` (a plugin); the built-ins are known."""
    declared = getattr(metric, "online_input", None)
    if declared in ("text", "conversation", "chat"):
        return declared
    if metric.name in CONVERSATION_SCORERS:
        return "conversation"
    return "chat" if metric.name in CHAT_RESPONSE_SCORERS else "text"


def generated_calls(response: Mapping[str, Any]) -> list[tuple[str, str, Any, str | None]]:
    """(name, arguments as JSON text, arguments parsed (the text when it is not JSON), call_id)
    of each `function_call` item of a Responses-shaped answer."""
    calls = []
    for item in response.get("output") or ():
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            text = item.get("arguments")
            text = text if isinstance(text, str) else "{}"
            try:
                parsed = loads(text)
            except ValueError:
                parsed = text
            calls.append((str(item.get("name")), text, parsed, item.get("call_id")))
    return calls


def scored_row(row: Mapping[str, Any], generation: Generation, shape: Shape) -> dict[str, Any]:
    """`row` with the generation in place (see the module docstring); `row` is not changed."""
    out = dict(row)
    answer, calls = generation.answer, generated_calls(generation.response)
    if shape == "chat":
        out["response"] = _chat_completion(answer, calls)
    else:
        out["response"] = answer
    if shape == "conversation":
        turns = _episode_turns(generation) if _is_episode(generation.response) else None
        if turns is None:
            turn: dict[str, Any] = {"type": "ai", "content": answer}
            if calls:
                turn["tool_calls"] = [{"name": name, "args": parsed} for name, _, parsed, _ in calls]
            turns = [turn]
        out["user_input"] = [*_conversation(row.get("user_input")), *turns]
    return out


def _is_episode(response: Mapping[str, Any]) -> bool:
    return any(isinstance(i, Mapping) and i.get("type") == "function_call_output" for i in response.get("output") or ())


def _episode_turns(generation: Generation) -> list[dict[str, Any]]:
    """An episode's items as RAGAS messages: an `ai` turn per policy turn (its text, its calls),
    a `tool` message per call output, in order."""
    from gym_metrics.targets import strip_reasoning, text_of

    turns: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for item in generation.response.get("output") or ():
        kind = item.get("type") if isinstance(item, Mapping) else None
        if kind == "message":
            current = {"type": "ai", "content": strip_reasoning(text_of(item.get("content")), generation.end_token)}
            turns.append(current)
        elif kind == "function_call":
            if current is None:
                current = {"type": "ai", "content": ""}
                turns.append(current)
            text = item.get("arguments") if isinstance(item.get("arguments"), str) else "{}"
            try:
                args = loads(text)
            except ValueError:
                args = text
            current.setdefault("tool_calls", []).append({"name": str(item.get("name")), "args": args})
        elif kind == "function_call_output":
            turns.append({"type": "tool", "content": str(item.get("output", ""))})
            current = None
    return turns


def _conversation(given: Any) -> list[Any]:
    """The row's messages before the generated turn (a string is the first human message)."""
    if given is None:
        return []
    if isinstance(given, str):
        return [{"type": "human", "content": given}]
    if isinstance(given, list):
        return list(given)
    raise RowError("user_input", f"must be a string or a list of messages to append the generated turn to, got {type(given).__name__}")


def _chat_completion(answer: str, calls: Sequence[tuple[str, str, Any, str | None]]) -> dict[str, Any]:
    """A chat-completions response holding the answer and its tool calls (`tool_calling`'s input)."""
    message: dict[str, Any] = {"role": "assistant", "content": answer}
    if calls:
        message["tool_calls"] = [
            {"id": call_id or f"call_{i}", "type": "function", "function": {"name": name, "arguments": text}}
            for i, (name, text, _, call_id) in enumerate(calls)
        ]
    return {"object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]}


def generated_entry(generation: Generation) -> dict[str, Any]:
    """The result's record of one generation: the scored text, tool calls, usage, latency."""
    entry: dict[str, Any] = {"response": generation.answer}
    calls = generated_calls(generation.response)
    if calls:
        entry["tool_calls"] = [{"name": name, "arguments": parsed} for name, _, parsed, _ in calls]
    usage = generation.usage
    entry["usage"] = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens, "total_tokens": usage.total_tokens}
    entry["latency_s"] = generation.latency_s
    entry["attempts"] = generation.attempts
    return entry


def default_request(row: Mapping[str, Any]) -> dict[str, Any]:
    """The chat request of a row when no prompt template is given: `user_input` as the user
    message (a string), or as the conversation (chat messages, or RAGAS messages converted)."""
    given = row.get("user_input")
    if isinstance(given, str):
        return {"messages": [{"role": "user", "content": given}]}
    if isinstance(given, list) and given and all(isinstance(m, Mapping) for m in given):
        if all("role" in m for m in given):
            return {"messages": [dict(m) for m in given]}
        if all(m.get("type") in _ROLES for m in given):
            return {"messages": _chat_messages(given)}
    raise RowError(
        "user_input",
        "without a prompt template the request is built from user_input, which must be a string or a "
        "list of messages; give a prompt template (--prompt-template, prompt_template=) to build it from other columns",
    )


def _chat_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """RAGAS messages as chat messages: tool calls get ids, which the tool answers after them reuse in order."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for i, message in enumerate(messages):
        kind, content = message["type"], message.get("content")
        chat: dict[str, Any] = {"role": _ROLES[kind], "content": content if isinstance(content, str) else ""}
        if kind == "ai" and message.get("tool_calls"):
            pending = [f"call_{i}_{j}" for j in range(len(message["tool_calls"]))]
            chat["tool_calls"] = [
                {"id": pending[j], "type": "function", "function": {"name": c.get("name"), "arguments": _json_text(c.get("args"))}}
                for j, c in enumerate(message["tool_calls"])
            ]
        elif kind == "tool":
            chat["tool_call_id"] = pending.pop(0) if pending else f"call_{i}"
        out.append(chat)
    return out


def _json_text(value: Any) -> str:
    return json.dumps({} if value is None else value)
