"""Request and answer shapes between the chat-completions and Responses APIs, so every caller
sees one answer shape (the Responses API's, what NeMo Gym environments read) whichever API the
model serves.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gym_metrics._util.jsonpath import compile_path as compile_path  # re-exported: _client reads paths with it


def strip_reasoning(text: str, end_token: str | None) -> str:
    """`text` without its reasoning part: everything up to and including the last `end_token`,
    then leading whitespace. Unchanged when `end_token` is None or absent."""
    if not end_token:
        return text
    head, found, tail = text.rpartition(end_token)
    return tail.lstrip() if found else text


def _arguments(value: Any) -> str:
    """Tool-call arguments as the JSON text both APIs carry."""
    if isinstance(value, str):
        return value
    return orjson.dumps({} if value is None else value).decode()


def text_of(content: Any) -> str:
    """Text of a message content: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def message_item(text: str, item_id: str | None = None) -> dict[str, Any]:
    """A Responses `message` output item holding `text` as one `output_text` content item."""
    return {
        "type": "message",
        "id": item_id or f"msg_{uuid.uuid4().hex[:24]}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def function_call_item(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    """A Responses `function_call` output item."""
    call_id = call_id or f"call_{uuid.uuid4().hex[:24]}"
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": _arguments(arguments),
        "status": "completed",
    }


def responses_usage(input_tokens: int | None, output_tokens: int | None) -> dict[str, Any] | None:
    """Responses `usage` from token counts (None when neither is known)."""
    if input_tokens is None and output_tokens is None:
        return None
    i, o = input_tokens or 0, output_tokens or 0
    return {"input_tokens": i, "output_tokens": o, "total_tokens": i + o}


def chat_to_responses(completion: Mapping[str, Any]) -> dict[str, Any]:
    """A chat completion as a Responses API response: reasoning (vLLM's `reasoning_content` /
    `reasoning`) to a `reasoning` item, message text to an `output_text` item of a `message`
    item, tool calls to `function_call` items, `prompt_tokens` / `completion_tokens` to
    `usage.input_tokens` / `output_tokens` / `total_tokens`. KeyError / TypeError / IndexError
    when it is not a chat completion."""
    message = completion["choices"][0]["message"]
    output: list[dict[str, Any]] = []
    # Item ids follow from the completion's id when it has one, so the same answer converts to
    # the same bytes (a resumed collection's metrics equal an uninterrupted one's).
    given = completion.get("id")
    tag = hashlib.sha256(given.encode()).hexdigest()[:24] if isinstance(given, str) and given else uuid.uuid4().hex[:24]
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        output.append({"type": "reasoning", "id": f"rs_{tag}", "summary": [{"type": "summary_text", "text": reasoning}]})
    text = text_of(message.get("content"))
    if text:
        output.append(message_item(text, f"msg_{tag}"))
    for call in message.get("tool_calls") or ():
        function = call["function"]
        output.append(function_call_item(function["name"], function.get("arguments"), call.get("id")))
    usage = completion.get("usage") or {}
    response: dict[str, Any] = {
        "id": completion.get("id") or f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "created_at": completion.get("created", 0),
        "model": completion.get("model", ""),
        "status": "completed",
        "output": output,
    }
    converted = responses_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))
    if converted is not None:
        prompt, completion = usage.get("prompt_tokens_details") or {}, usage.get("completion_tokens_details") or {}
        # The details every Responses answer has (typed readers require them); unknown stays None.
        converted["input_tokens_details"] = {"cached_tokens": prompt.get("cached_tokens")}
        converted["output_tokens_details"] = {"reasoning_tokens": completion.get("reasoning_tokens")}
        response["usage"] = converted
    return response


def with_request_fields(response: dict[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """A converted chat answer with the fields every Responses API answer carries from its
    request (`tools`, `tool_choice`, `parallel_tool_calls`), as NeMo Gym's vLLM model server
    fills them: typed readers (a ported environment's `body.response`) require them."""
    tools = [_responses_tool(t) for t in request.get("tools") or ()]
    choice = request.get("tool_choice", "auto")
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):  # chat's form
        choice = {"type": "function", "name": choice["function"].get("name")}
    return {"tools": tools, "tool_choice": choice, "parallel_tool_calls": request.get("parallel_tool_calls", True), **response}


def output_text(response: Mapping[str, Any]) -> str:
    """All `output_text` of the response's `message` items, joined."""
    return "".join(
        str(part.get("text", ""))
        for item in response.get("output") or ()
        if isinstance(item, Mapping) and item.get("type") == "message"
        for part in item.get("content") or ()
        if isinstance(part, Mapping) and part.get("type") == "output_text"
    )


def output_tool_calls(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The response's `function_call` items as `{name, arguments (parsed when JSON), call_id}`."""
    calls = []
    for item in response.get("output") or ():
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            arguments = item.get("arguments")
            try:
                arguments = orjson.loads(arguments) if isinstance(arguments, str) else arguments
            except orjson.JSONDecodeError:
                pass
            calls.append({"name": item.get("name"), "arguments": arguments, "call_id": item.get("call_id")})
    return calls


def _chat_message(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """One Responses input item as a chat message (None: an item chat cannot carry)."""
    kind = item.get("type", "message")
    if kind == "function_call":
        call = {"id": item.get("call_id"), "type": "function", "function": {"name": item.get("name"), "arguments": _arguments(item.get("arguments"))}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    if kind == "function_call_output":
        return {"role": "tool", "tool_call_id": item.get("call_id"), "content": text_of(item.get("output"))}
    if kind != "message":
        return None
    role = item.get("role", "user")
    return {"role": "system" if role == "developer" else role, "content": text_of(item.get("content"))}


def responses_request_to_chat(request: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses API request (NeMo Gym's `responses_create_params`) as a chat-completions
    request: `instructions` to a system message, `input` to messages, function tools to chat
    tools, `max_output_tokens` to `max_tokens`; other keys kept."""
    body = {k: v for k, v in request.items() if k not in ("input", "instructions", "tools", "max_output_tokens")}
    messages: list[dict[str, Any]] = []
    if request.get("instructions"):
        messages.append({"role": "system", "content": request["instructions"]})
    given = request.get("input", [])
    items = [{"role": "user", "content": given}] if isinstance(given, str) else list(given)
    messages.extend(m for m in map(_chat_message, items) if m is not None)
    body["messages"] = messages
    if request.get("tools"):
        body["tools"] = [_chat_tool(t) for t in request["tools"]]
    if request.get("max_output_tokens") is not None:
        body["max_tokens"] = request["max_output_tokens"]
    return body


def _chat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    if "function" in tool:  # already chat-shaped
        return dict(tool)
    function = {k: v for k, v in tool.items() if k in ("name", "description", "parameters", "strict")}
    return {"type": "function", "function": function}


def _responses_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    if "function" not in tool:  # already Responses-shaped
        return dict(tool)
    return {"type": "function", **tool["function"]}


def chat_request_to_responses(request: Mapping[str, Any]) -> dict[str, Any]:
    """A chat-completions request (NeMo Evaluator's prompt template) as a Responses API
    request: messages to `input` items (assistant tool calls to `function_call`, tool answers to
    `function_call_output`), chat tools to function tools, `max_tokens` to `max_output_tokens`."""
    body = {k: v for k, v in request.items() if k not in ("messages", "tools", "max_tokens")}
    items: list[dict[str, Any]] = []
    for message in request.get("messages") or ():
        role = message.get("role", "user")
        if role == "tool":
            items.append({"type": "function_call_output", "call_id": message.get("tool_call_id"), "output": text_of(message.get("content"))})
            continue
        if message.get("content") not in (None, ""):
            items.append({"type": "message", "role": role, "content": text_of(message.get("content"))})
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            items.append({"type": "function_call", "call_id": call.get("id"), "name": function.get("name"), "arguments": _arguments(function.get("arguments"))})
    body["input"] = items
    if request.get("tools"):
        body["tools"] = [_responses_tool(t) for t in request["tools"]]
    if request.get("max_tokens") is not None:
        body["max_output_tokens"] = request["max_tokens"]
    return body
