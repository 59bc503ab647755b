"""Request and answer shapes between the chat-completions and Responses APIs, so every caller
sees one answer shape (the Responses API's, what NeMo Gym environments read) whichever API the
model serves.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

import orjson

from gym_metrics._util.jsonpath import compile_path as compile_path  # re-exported: _client reads paths with it
from gym_metrics.targets._chat_dialect import INCOMPLETE, answer_items, text_of
from gym_metrics.targets._chat_dialect import arguments_text as _arguments


def strip_reasoning(text: str, end_token: str | None) -> str:
    """`text` without its reasoning part: everything up to and including the last `end_token`,
    then leading whitespace. Unchanged when `end_token` is None or absent."""
    if not end_token:
        return text
    head, found, tail = text.rpartition(end_token)
    return tail.lstrip() if found else text



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


def chat_to_responses(completion: Mapping[str, Any], think_tags: bool = True) -> dict[str, Any]:
    """A chat completion as a Responses API response, as NeMo Gym's converter reads it
    (_chat_dialect.answer_items: `<think>` blocks and vLLM's `reasoning_content` to a
    `reasoning` item, the text to a `message` item, tool calls to `function_call` items); a
    `length` or `content_filter` finish makes it `incomplete`; `prompt_tokens` /
    `completion_tokens` / `total_tokens` to `usage`. KeyError / TypeError / IndexError when it
    is not a chat completion. `think_tags=False` keeps `<think>` blocks in the text."""
    choice = completion["choices"][0]
    message = choice["message"]
    # Item ids follow from the completion's id when it has one, so the same answer converts to
    # the same bytes (a resumed collection's metrics equal an uninterrupted one's).
    given = completion.get("id")
    tag = hashlib.sha256(given.encode()).hexdigest()[:24] if isinstance(given, str) and given else uuid.uuid4().hex[:24]
    output = answer_items(message, tag, think_tags)
    usage = completion.get("usage") or {}
    incomplete = INCOMPLETE.get(choice.get("finish_reason"))
    response: dict[str, Any] = {
        "id": completion.get("id") or f"resp_{uuid.uuid4().hex[:24]}",
        "object": "response",
        "created_at": completion.get("created", 0),
        "model": completion.get("model", ""),
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "output": output,
    }
    converted = responses_usage(usage.get("prompt_tokens"), usage.get("completion_tokens"))
    if converted is not None:
        if isinstance(usage.get("total_tokens"), int):
            converted["total_tokens"] = usage["total_tokens"]  # a provider's own total may count more
        # The details every Responses answer has (typed readers require them); unknown stays None.
        converted["input_tokens_details"] = {"cached_tokens": _detail(usage, "prompt_tokens_details", "cached_tokens", "cached_input_tokens", "cache_read_input_tokens")}
        converted["output_tokens_details"] = {"reasoning_tokens": _detail(usage, "completion_tokens_details", "reasoning_tokens", "reasoning_output_tokens")}
        response["usage"] = converted
    return response


def _detail(usage: Mapping[str, Any], group: str, name: str, *aliases: str) -> int | None:
    """A usage detail as NeMo Gym reads it: `usage[group][name]`, else the first of the
    providers' top-level `aliases` (`cached_input_tokens`, `cache_read_input_tokens`,
    `reasoning_output_tokens`); only a count (an int >= 0, not a bool) is taken, else None."""
    details = usage.get(group)
    for value in (details.get(name) if isinstance(details, Mapping) else None, *(usage.get(a) for a in aliases)):
        if type(value) is int and value >= 0:
            return value
    return None


_ECHOED = ("model", "instructions", "max_output_tokens", "metadata", "reasoning", "service_tier", "temperature", "text", "top_logprobs", "top_p", "user")
"""Fields of the Responses request a converted answer carries, as NeMo Gym's converter fills
them (besides tools, tool_choice and parallel_tool_calls, which every answer has)."""


def with_request_fields(response: dict[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """A converted chat answer with the fields a Responses API answer carries from its request
    (`request` in either API's shape), as NeMo Gym's converter fills them: typed readers (a
    ported environment's `body.response`) require `tools`, `tool_choice` and
    `parallel_tool_calls`."""
    tools = [_responses_tool(t) for t in request.get("tools") or ()]
    choice = request.get("tool_choice", "auto")
    if isinstance(choice, Mapping) and isinstance(choice.get("function"), Mapping):  # chat's form
        choice = {"type": "function", "name": choice["function"].get("name")}
    echoed = {k: request[k] for k in _ECHOED if request.get(k) is not None}
    return {**response, "tools": tools, "tool_choice": choice, "parallel_tool_calls": request.get("parallel_tool_calls", True), **echoed}


def output_text(response: Mapping[str, Any]) -> str:
    """All `output_text` of the response's `message` items, joined (a malformed item or part,
    such as a `content` that is not a list, holds none)."""
    output = response.get("output")
    return "".join(
        str(part.get("text", ""))
        for item in (output if isinstance(output, list) else ())
        if isinstance(item, Mapping) and item.get("type") == "message" and isinstance(item.get("content"), list)
        for part in item["content"]
        if isinstance(part, Mapping) and part.get("type") == "output_text"
    )


def output_tool_calls(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The response's `function_call` items as `{name, arguments (parsed when JSON), call_id}`."""
    calls = []
    output = response.get("output")
    for item in output if isinstance(output, list) else ():
        if isinstance(item, Mapping) and item.get("type") == "function_call":
            arguments = item.get("arguments")
            try:
                arguments = orjson.loads(arguments) if isinstance(arguments, str) else arguments
            except orjson.JSONDecodeError:
                pass
            calls.append({"name": item.get("name"), "arguments": arguments, "call_id": item.get("call_id")})
    return calls


def _responses_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    if "function" not in tool:  # already Responses-shaped; a null defer_loading replayed as false, as NeMo Gym replays it
        return {**tool, "defer_loading": False} if "defer_loading" in tool and tool["defer_loading"] is None else dict(tool)
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
