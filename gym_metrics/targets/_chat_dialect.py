"""The Responses API spoken to a chat-completions endpoint, as NeMo Gym's model servers speak it
(its `ResponsesConverter`), so an environment sees the same trajectory whichever API the policy
serves (tests/targets/test_chat_dialect.py holds NeMo Gym 0.7.0's own conversions).

Request: `input` becomes messages. A string is one user message of one text part. Text parts
become `text` parts and images `image_url` parts (`detail` kept, "auto" by default), videos
`video_url` parts. Everything the model said in one turn (reasoning, wrapped in `<think>` tags,
text, refusals, function calls) becomes one assistant message with its `tool_calls`; each
function call output a `tool` message. `instructions` is the first system message, with the
system and developer messages that lead the input folded into it. Items, parts and fields chat
cannot carry are refused (ChatConversionError), never dropped.

Answer: `<think>` blocks of the content become one reasoning item, the rest a message (an empty
answer still gives an empty message), a refusal a refusal part, each tool call a function call
(its id as the item's id); a completion cut at its length limit (or filtered) is `incomplete`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

_NO_CHAT_FIELDS = ("background", "context_management", "conversation", "include", "max_tool_calls", "previous_response_id", "prompt", "truncation")
_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL)


class ChatConversionError(ValueError):
    """A Responses request chat completions cannot express (the message says which part)."""


def responses_request_to_chat(request: Mapping[str, Any], *, token_ids: bool = False) -> dict[str, Any]:
    """A Responses API request (NeMo Gym's `responses_create_params`) as a chat-completions
    request, as NeMo Gym converts it (module docstring); ChatConversionError. `token_ids`: a
    generated turn's assistant message carries its token fields back (NeMo Gym's
    `return_token_id_information`), and function tools lose `strict`, as its vLLM model server
    sends them. A malformed request (a field missing or of the wrong kind) is refused as well:
    it is that row's failure, not a crash of the run."""
    try:
        return _to_chat(request, token_ids)
    except (KeyError, TypeError, AttributeError) as exc:
        why = f"field {exc} is missing" if isinstance(exc, KeyError) else str(exc)
        raise ChatConversionError(f"a malformed Responses request: {why}") from None


def _to_chat(request: Mapping[str, Any], token_ids: bool) -> dict[str, Any]:
    given = {k: v for k, v in request.items() if v is not None}
    refused = sorted(set(_NO_CHAT_FIELDS) & given.keys())
    if refused:
        raise ChatConversionError(f"Responses request field(s) {refused} have no Chat Completions representation")
    turn = _Turn(token_ids)
    items = given.pop("input", [])
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": items}]}] if isinstance(items, str) else items
    for item in items:
        if not isinstance(item, Mapping):
            raise ChatConversionError(f"an input item must be an object, got {type(item).__name__}")
        turn.add(dict(item))
    messages = turn.finish()
    body: dict[str, Any] = {}
    instructions = given.pop("instructions", None)
    if instructions:
        leading = [instructions]
        while messages and messages[0]["role"] in ("system", "developer"):
            leading.append(text_of(messages.pop(0)["content"]))
        messages.insert(0, {"content": "\n\n".join(leading), "role": "system"})
    for message in messages:
        _check_content(message)
    body["messages"] = messages
    if "max_output_tokens" in given:
        given["max_tokens"] = given.pop("max_output_tokens")
    _reasoning(given)
    _text_format(given)
    choice = _tool_choice(given.pop("tool_choice", None))
    tools = given.pop("tools", None)
    if tools:
        given["tools"] = [_tool(t, strict=not token_ids) for t in tools]
        if choice is not None:
            given["tool_choice"] = choice
    else:
        if choice not in (None, "auto", "none"):
            raise ChatConversionError(f"tool_choice={choice!r} requires at least one tool")
        given.pop("parallel_tool_calls", None)
    return {**body, **given}


class _Turn:
    """The messages so far, and the assistant message being gathered from one turn's items."""

    def __init__(self, token_ids: bool = False) -> None:
        self.messages: list[dict[str, Any]] = []
        self.content = self.refusal = ""
        self.calls: list[dict[str, Any]] = []
        self.open = False
        self.token_ids = token_ids
        self.tokens: dict[str, Any] | None = None
        """The token fields of the turn being gathered (its last item with them)."""

    def add(self, item: dict[str, Any]) -> None:
        self._add(item)
        if self.token_ids and item.get("prompt_token_ids"):
            self.tokens = {k: item[k] for k in ("prompt_token_ids", "generation_token_ids", "generation_log_probs")}
            if item.get("routed_experts") is not None:  # NeMo Gym sends it back too, when the policy gave it
                self.tokens["routed_experts"] = item["routed_experts"]

    def _add(self, item: dict[str, Any]) -> None:
        kind = item.get("type") or ("message" if item.get("role") else None)
        if kind == "message":
            self._message(item)
        elif kind == "reasoning":
            self.open = True
            self.content += "".join(f"<think>{s['text']}</think>" for s in item.get("summary") or () if s.get("text"))
        elif kind == "function_call":
            if item.get("namespace") is not None:
                raise ChatConversionError("a function call's namespace has no Chat Completions representation")
            self.open = True
            self.calls.append(_call(item["call_id"], item["name"], item["arguments"]))
        elif kind == "function_call_output":
            self.flush()
            self.messages.append({"content": _tool_output(item), "role": "tool", "tool_call_id": item["call_id"]})
        else:
            raise ChatConversionError(f"{kind!r} items have no Chat Completions representation; use a Responses API endpoint")

    def _message(self, item: dict[str, Any]) -> None:
        role, content = item.get("role"), item.get("content")
        if item.get("phase") is not None and not _phase_dropped(item):
            raise ChatConversionError("a message's phase has no Chat Completions representation")
        if role == "assistant":
            self.open = True
            if isinstance(content, list):
                for part in content:
                    kind = part.get("type")
                    text = part.get("text") if kind not in _INPUT_PARTS or kind == "input_text" else None
                    refusal = part.get("refusal") if kind not in _INPUT_PARTS else None
                    if not isinstance(text, str) and not isinstance(refusal, str):
                        raise ChatConversionError(f"assistant content part {kind!r} has no Chat Completions representation")
                    self.content += text if isinstance(text, str) else ""
                    self.refusal += refusal if isinstance(refusal, str) else ""
            elif isinstance(content, str):
                self.content += content
            elif content is not None:
                raise ChatConversionError(f"assistant content must be a string or a list of parts, got {type(content).__name__}")
            for call in item.get("tool_calls") or ():  # a chat-shaped assistant turn
                self.calls.append(_call(call["id"], call["function"]["name"], call["function"]["arguments"]))
            return
        if role not in ("user", "system", "developer", "tool"):
            raise ChatConversionError(f"unknown message role {role!r}")
        self.flush()
        if isinstance(content, list):
            content = [_part(p) for p in content]
        message = {"content": content, "role": role}
        if role == "tool":  # a chat-shaped tool answer
            message["tool_call_id"] = item["tool_call_id"]
        self.messages.append(message)

    def flush(self) -> None:
        if self.open or self.content or self.refusal or self.calls:
            message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
            if self.calls:
                message["tool_calls"] = self.calls
            if self.refusal:
                message["refusal"] = self.refusal
            if self.tokens:  # a generated turn: its tokens go back with it, as NeMo Gym sends them
                message.update(self.tokens)
            self.messages.append(message)
        self.content = self.refusal = ""
        self.calls, self.open, self.tokens = [], False, None

    def finish(self) -> list[dict[str, Any]]:
        self.flush()
        return self.messages


def _check_content(message: Mapping[str, Any]) -> None:
    """What chat requires of a message's content, as NeMo Gym's check of the chat request
    refuses it (after the leading system messages are folded into `instructions`, which takes
    only their text): a string or a list of parts, and in a system, developer or tool message
    text parts only; a tool message's tool_call_id is a string."""
    role, content = message["role"], message["content"]
    if role == "assistant":
        return
    if not isinstance(content, (str, list)):
        raise ChatConversionError(f"a {role} message's content must be a string or a list of parts, got {type(content).__name__}")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise ChatConversionError(f"a tool message's tool_call_id must be a string, got {type(message.get('tool_call_id')).__name__}")
    media = sorted({p["type"] for p in content if p["type"] != "text"}) if isinstance(content, list) else []
    if media and role != "user":
        raise ChatConversionError(f"a {role} message cannot carry {media} parts in Chat Completions")


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    """A chat tool call; its id, name and arguments are text in chat (NeMo Gym's request check
    refuses others, e.g. arguments given as an object)."""
    for field, value in (("id", call_id), ("name", name), ("arguments", arguments)):
        if not isinstance(value, str):
            raise ChatConversionError(f"a tool call's {field} must be a string, got {type(value).__name__}")
    return {"id": call_id, "function": {"arguments": arguments, "name": name}, "type": "function"}


_INPUT_PARTS = ("input_text", "input_image", "input_file", "input_audio", "input_video")
"""The input content part types: none has a `refusal`, and only input_text a `text` (NeMo Gym's
request check drops the others given), so in an assistant message an image, file, audio or video part
carries nothing chat can hold, and is refused."""


def _phase_dropped(item: Mapping[str, Any]) -> bool:
    """A user, system or developer message with a list of parts and a status is NeMo Gym's
    `Message` item, whose type has no `phase`: it is dropped, not refused."""
    return item.get("role") in ("user", "system", "developer") and isinstance(item.get("content"), list) and item.get("status") in ("in_progress", "completed", "incomplete")


def _part(part: Mapping[str, Any]) -> dict[str, Any]:
    """A user, system or developer content part in chat's form."""
    kind = part.get("type")
    if kind == "input_text":
        return {"type": "text", "text": part["text"]}
    if kind == "input_image":
        url = part.get("image_url")
        if url is None:
            raise ChatConversionError("an image given by file_id has no Chat Completions representation")
        url = url.get("url", "") if isinstance(url, Mapping) else url
        if not url:
            raise ChatConversionError("input_image needs a non-empty image_url")
        detail = part.get("detail", "auto")
        if detail == "original":
            raise ChatConversionError("image detail 'original' has no Chat Completions representation")
        return {"type": "image_url", "image_url": {"url": url, "detail": detail}}
    if kind == "input_video":
        key = "video_url" if "video_url" in part else "video"
        url = part.get(key)
        url = url.get("url", "") if isinstance(url, Mapping) else url
        if not url:
            raise ChatConversionError(f"input_video.{key} needs a non-empty URL")
        return {"type": "video_url", "video_url": {"url": url}}
    raise ChatConversionError(f"content part {kind!r} has no Chat Completions representation")


def _tool_output(item: Mapping[str, Any]) -> Any:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, Sequence):
        other = sorted({str(p.get("type")) for p in output if p.get("type") != "input_text"})
        if other:
            raise ChatConversionError(f"a tool message cannot carry the output of call {item.get('call_id')!r}: parts {other}")
        return [{"type": "text", "text": p["text"]} for p in output]
    raise ChatConversionError(f"a function_call_output's output must be a string or a list of parts, got {type(output).__name__}")


def text_of(content: Any) -> str:
    """Text of a message content: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def arguments_text(value: Any) -> str:
    """Tool-call arguments as the JSON text both APIs carry."""
    if isinstance(value, str):
        return value
    return orjson.dumps({} if value is None else value).decode()


def _reasoning(given: dict[str, Any]) -> None:
    reasoning = given.pop("reasoning", None)
    if reasoning is None:
        return
    other = sorted(k for k, v in reasoning.items() if k != "effort" and v is not None)
    if other:
        raise ChatConversionError(f"reasoning field(s) {other} have no Chat Completions representation")
    if reasoning.get("effort") is not None:
        given["reasoning_effort"] = reasoning["effort"]


def _text_format(given: dict[str, Any]) -> None:
    text = given.pop("text", None)
    if text is None:
        return
    form = text.get("format")
    if form is not None:
        kind = form.get("type")
        if kind == "json_schema":
            schema = {"name": form["name"], "schema": form["schema"], **{k: form[k] for k in ("strict", "description") if form.get(k) is not None}}
            given["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif kind == "json_object":
            given["response_format"] = {"type": "json_object"}
        elif kind != "text":
            raise ChatConversionError(f"text format {kind!r} has no Chat Completions representation")
    if text.get("verbosity") is not None:
        given["verbosity"] = text["verbosity"]


def _tool_choice(choice: Any) -> Any:
    if choice is None or isinstance(choice, str):
        return choice
    kind = choice.get("type")
    if kind in ("function", "custom"):
        return _reference(choice)
    if kind == "allowed_tools":
        return {"type": "allowed_tools", "allowed_tools": {"mode": choice["mode"], "tools": [_reference(t) for t in choice["tools"]]}}
    raise ChatConversionError(f"tool_choice type {kind!r} has no Chat Completions representation")


def _reference(tool: Mapping[str, Any]) -> dict[str, Any]:
    kind = tool.get("type")
    if kind not in ("function", "custom"):
        raise ChatConversionError(f"tool reference type {kind!r} has no Chat Completions representation")
    return {"type": kind, kind: {k: v for k, v in tool.items() if k != "type"}}


def _tool(tool: Mapping[str, Any], strict: bool = True) -> dict[str, Any]:
    """A tool as chat declares it; `strict=False` drops a function's `strict`, as NeMo Gym's
    vLLM model server does (vLLM does not enforce it, and templates that render a function's
    other keys would put it into the prompt)."""
    if "function" in tool and "name" not in tool:  # already chat-shaped
        if not strict and isinstance(tool["function"], Mapping) and "strict" in tool["function"]:
            return {**tool, "function": {k: v for k, v in tool["function"].items() if k != "strict"}}
        return dict(tool)
    kind = tool.get("type")
    if kind not in ("function", "custom"):
        raise ChatConversionError(f"tool type {kind!r} has no Chat Completions conversion")
    if tool.get("defer_loading"):
        raise ChatConversionError(f"{kind} tools with defer_loading have no Chat Completions representation")
    fields = {k: v for k, v in tool.items() if k not in ("type", "defer_loading") and v is not None}
    if kind == "function":
        return {"type": "function", "function": {k: v for k, v in fields.items() if strict or k != "strict"}}
    form = fields.get("format")
    if form is not None and form.get("type") == "grammar":
        fields["format"] = {"type": "grammar", "grammar": {k: v for k, v in form.items() if k != "type"}}
    return {"type": "custom", "custom": fields}


def answer_items(message: Mapping[str, Any], tag: str, think_tags: bool = True) -> list[dict[str, Any]]:
    """A chat answer's message as Responses output items, as NeMo Gym reads it (module
    docstring); `reasoning_content` / `reasoning` (vLLM's reasoning parser) lead the reasoning.
    `think_tags=False` leaves `<think>` blocks in the text (for a caller that strips reasoning
    by its own end token). Item ids are made from `tag`."""
    content = text_of(message.get("content"))
    refusal = message.get("refusal") or ""
    thoughts = _THINK.findall(content) if think_tags else []
    if thoughts:
        content = _THINK.sub("", content)
    parsed = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(parsed, str) and parsed:
        thoughts.insert(0, parsed)
    items: list[dict[str, Any]] = []
    if thoughts:
        summary = [{"type": "summary_text", "text": t} for t in thoughts]
        items.append({"type": "reasoning", "id": f"rs_{tag}", "summary": summary})
    calls = message.get("tool_calls") or []
    empty = not (items or calls or refusal)
    if content or refusal or empty:
        parts: list[dict[str, Any]] = []
        if content or empty:
            parts.append({"type": "output_text", "text": content, "annotations": []})
        if refusal:
            parts.append({"type": "refusal", "refusal": str(refusal)})
        items.append({"type": "message", "id": f"msg_{tag}", "role": message.get("role") or "assistant", "status": "completed", "content": parts})
    for call in calls:
        function = call["function"]
        items.append({
            "type": "function_call", "id": call["id"], "call_id": call["id"], "name": function["name"],
            "arguments": arguments_text(function.get("arguments")), "status": "completed",
        })  # fmt: skip
    return items


INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
"""A chat finish_reason that ends a response incomplete, and the reason it gives."""


__all__ = ["INCOMPLETE", "ChatConversionError", "answer_items", "responses_request_to_chat"]
