"""Token IDs and log-probs for the scripted policy, as vLLM returns them to a chat request that
asks (`return_token_ids`): a tokenizer (byte-level by default, or any `encode(text) -> ids`,
e.g. a Hugging Face `tokenizers` tokenizer's) over a fixed chat template, so the IDs are exact
and a turn's prompt begins with the previous turn's prompt and generation, as a real chat
template makes it (a test can check lineage); the log-prob of a token is a function of it and
its position, so a test knows every value it must find in the rows.

Template: each message is `<|role|>` + its text + `<|end|>` (an assistant's text: its content,
then its tool calls as `<|call|>name arguments`), and the prompt ends with `<|assistant|>`;
the generation is the answer's text and `<|end|>`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    text = content if isinstance(content, str) else ""
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        text += f"<|call|>{function.get('name')} {function.get('arguments')}"
    return text


Encode = Callable[[str], list[int]]


def byte_ids(text: str) -> list[int]:
    """The default tokenizer: one ID per UTF-8 byte."""
    return list(text.encode())


def prompt_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "".join(f"<|{m.get('role')}|>{message_text(m)}<|end|>" for m in messages) + "<|assistant|>"


def prompt_ids(messages: Sequence[Mapping[str, Any]], encode: Encode = byte_ids) -> list[int]:
    return encode(prompt_text(messages))


def generation_ids(message: Mapping[str, Any], encode: Encode = byte_ids) -> list[int]:
    return encode(message_text(message) + "<|end|>")


def log_prob(token: int, position: int) -> float:
    """The scripted log-prob of `token` at `position` of the generation."""
    return -round(((token * 31 + position * 7) % 997 + 1) / 1000, 3)


def token_answer(completion: dict[str, Any], request: Mapping[str, Any], fault: str | None, encode: Encode = byte_ids) -> None:
    """Add vLLM's token fields to a chat completion answering `request` (in place). `fault`:
    `short_log_probs` drops the last log-prob (566 ids, 565 log-probs), `break_lineage`
    prepends a token to the prompt IDs."""
    choice = completion["choices"][0]
    prompt = prompt_ids(request.get("messages") or [], encode)
    ids = generation_ids(choice["message"], encode)
    if fault == "break_lineage":
        prompt = [0, *prompt]
    content: list[dict[str, Any]] = [{"token": f"token_id:{t}", "logprob": log_prob(t, i), "bytes": None, "top_logprobs": []} for i, t in enumerate(ids)]
    if fault == "short_log_probs":
        content = content[:-1]
    completion["prompt_token_ids"] = prompt
    choice["token_ids"] = ids
    choice["logprobs"] = {"content": content}
    completion["usage"] = {"prompt_tokens": len(prompt), "completion_tokens": len(ids), "total_tokens": len(prompt) + len(ids)}
