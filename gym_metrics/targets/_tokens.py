"""Token IDs and log-probs from a policy that returns them, placed where NeMo Gym's vLLM model
server places them: `prompt_token_ids`, `generation_token_ids` and `generation_log_probs`
(and `routed_experts` when given) on the last output item of the turn.

A vLLM chat completion gives them when asked with `logprobs`, `top_logprobs`,
`return_tokens_as_token_ids` and `return_token_ids` (REQUEST_PARAMS): `prompt_token_ids` on the
completion, `token_ids` on the choice, and `logprobs.content[*]` (`token_id:N` and its
`logprob`), whose tokens must be the choice's IDs; a message that carries the three fields
itself (NeMo Gym's own servers) is read as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TOKEN_FIELDS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs")
EXTRA_FIELDS = ("routed_experts",)
REQUEST_PARAMS: dict[str, Any] = {"logprobs": True, "top_logprobs": 0, "return_tokens_as_token_ids": True, "return_token_ids": True}
"""What a vLLM chat request carries to get them back, as NeMo Gym 0.7.0's vLLM model server
sends them with `return_token_id_information` and `request_prompt_and_generation_token_ids`
(`top_logprobs: 0` pinned: vLLM gives no log-probs, and so no IDs, for a null one)."""


class TokenInfoError(ValueError):
    """The answer's token information is missing, malformed or contradicts itself (the message
    says what; `code` names the kind, as a rollout's gap records it)."""

    def __init__(self, message: str, code: str = "token_ids_missing") -> None:
        super().__init__(message)
        self.code = code


def chat_token_fields(completion: Mapping[str, Any]) -> dict[str, Any]:
    """The token fields of a chat completion, from the sources NeMo Gym's vLLM model server reads
    in its order: the message's own three fields, else the choice's log-probs with the prompt and
    generation IDs vLLM returns beside them. Where two sources carry the generation (or prompt)
    IDs they must agree; TokenInfoError when they do not, or the fields are missing or malformed
    (NeMo Gym's server fails the call on each of them)."""
    choices = completion.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices else None
    if not isinstance(choice, Mapping):
        raise TokenInfoError("the answer has no choice (choices[0]) to read token IDs from")
    message = _mapping(choice.get("message"), "choices[0].message")
    prompt, generated = completion.get("prompt_token_ids"), choice.get("token_ids")
    if (prompt is None) != (generated is None):
        raise TokenInfoError(f"the answer has {'prompt_token_ids' if generated is None else 'choice.token_ids'} without "
                             f"{'choice.token_ids' if generated is None else 'prompt_token_ids'}")  # fmt: skip
    present = [k for k in TOKEN_FIELDS if k in message]
    if present:
        out = checked_token_fields(message, "the message")
        if prompt is not None and (_ids(prompt, "prompt_token_ids") != out["prompt_token_ids"]
                                   or _ids(generated, "choice.token_ids") != out["generation_token_ids"]):  # fmt: skip
            raise TokenInfoError("the message's token IDs disagree with the answer's prompt_token_ids / choice.token_ids", "token_ids_disagree")
    else:
        content = _mapping(choice.get("logprobs"), "choices[0].logprobs").get("content")
        if not isinstance(content, list):
            raise TokenInfoError("the answer carries no log-probs (choice.logprobs.content): is the policy vLLM >= 0.10.2?")
        if prompt is None:
            raise TokenInfoError("the answer carries no prompt_token_ids (vLLM's return_token_ids)")
        entries = [_mapping(e, f"logprobs.content[{i}]") for i, e in enumerate(content)]
        from_log_probs = [_token_of(e.get("token"), i) for i, e in enumerate(entries)]
        out = {"prompt_token_ids": _ids(prompt, "prompt_token_ids"), "generation_token_ids": _ids(generated, "choice.token_ids"),
               "generation_log_probs": _log_probs([e.get("logprob") for e in entries], "logprobs.content[*].logprob")}  # fmt: skip
        ids = out["generation_token_ids"]
        if ids[: len(from_log_probs)] != from_log_probs[: len(ids)]:  # (a count that differs is the length gap's)
            raise TokenInfoError("choice.token_ids disagree with the log-probs' tokens (logprobs.content[*].token)", "token_ids_disagree")
    for key in EXTRA_FIELDS:
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def checked_token_fields(item: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The three token fields of a message or output item, each a list of integers (IDs) or
    numbers (log-probs); TokenInfoError naming what is missing or of the wrong type."""
    missing = [k for k in TOKEN_FIELDS if k not in item]
    if missing:
        present = [k for k in TOKEN_FIELDS if k in item]
        raise TokenInfoError(f"{where} carries {', '.join(present)} without {', '.join(missing)}")
    return {"prompt_token_ids": _ids(item["prompt_token_ids"], "prompt_token_ids"),
            "generation_token_ids": _ids(item["generation_token_ids"], "generation_token_ids"),
            "generation_log_probs": _log_probs(item["generation_log_probs"], "generation_log_probs")}  # fmt: skip


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TokenInfoError(f"{where} is {type(value).__name__}, not an object", "token_ids_malformed")
    return value


def _ids(values: Any, where: str) -> list[int]:
    """Token IDs as sent: a list of integers (not floats or booleans, which a trainer would
    read as other tokens), else TokenInfoError."""
    if not isinstance(values, list):
        raise TokenInfoError(f"{where} is {type(values).__name__}, not a list of token IDs", "token_ids_malformed")
    for i, t in enumerate(values):
        if type(t) is not int:
            raise TokenInfoError(f"{where}[{i}] is {t!r}, not an integer token ID", "token_ids_malformed")
    return list(values)


def _log_probs(values: Any, where: str) -> list[float]:
    if not isinstance(values, list):
        raise TokenInfoError(f"{where} is {type(values).__name__}, not a list of log-probs", "token_ids_malformed")
    for i, p in enumerate(values):
        if type(p) not in (float, int):
            raise TokenInfoError(f"{where}[{i}] is {p!r}, not a number", "token_ids_malformed")
    return [float(p) for p in values]


def _token_of(token: Any, i: int) -> int:
    """The ID of a log-prob entry's `token`: vLLM's `token_id:N` (with return_tokens_as_token_ids)."""
    text = token.removeprefix("token_id:") if isinstance(token, str) else None
    if text is None or not text.isascii() or not text.isdigit():
        raise TokenInfoError(f"logprobs.content[{i}].token is {token!r}, not token_id:N", "token_ids_malformed")
    return int(text)


def token_fields_of(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """An output item's token fields, checked (TokenInfoError), when it carries any."""
    if not any(k in item for k in TOKEN_FIELDS):
        return None
    out = checked_token_fields(item, "the last output item")
    out.update((k, item[k]) for k in EXTRA_FIELDS if k in item)
    return out
