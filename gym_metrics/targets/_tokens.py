"""Token IDs and log-probs from a policy that returns them, placed where NeMo Gym's vLLM model
server places them: `prompt_token_ids`, `generation_token_ids` and `generation_log_probs`
(and `routed_experts` when given) on the last output item of the turn.

A vLLM chat completion gives them when asked with `logprobs`, `top_logprobs`,
`return_tokens_as_token_ids` and `return_token_ids` (REQUEST_PARAMS): `prompt_token_ids` on the completion, `token_ids` on the
choice (older vLLM: the `token_id:N` strings of `logprobs.content[*].token`) and
`logprobs.content[*].logprob`; a message that carries the three fields itself (NeMo Gym's own
servers) is read as it is.
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
    """The answer's token information is missing or malformed (the message says what)."""


def chat_token_fields(completion: Mapping[str, Any]) -> dict[str, Any]:
    """The token fields of a chat completion (see the module docstring); TokenInfoError when
    they are missing or malformed."""
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    if all(k in message for k in TOKEN_FIELDS):
        fields = {k: message[k] for k in TOKEN_FIELDS}
    else:
        content = (choice.get("logprobs") or {}).get("content")
        ids = choice.get("token_ids")
        if content is None and ids is None:
            raise TokenInfoError("the answer carries no token ids (choice.token_ids, logprobs.content): is the policy vLLM >= 0.10.2?")
        log_probs = [entry["logprob"] for entry in content or ()]
        if ids is None:
            ids = [str(entry["token"]).removeprefix("token_id:") for entry in content or ()]
        prompt = completion.get("prompt_token_ids", message.get("prompt_token_ids"))
        if prompt is None:
            raise TokenInfoError("the answer carries no prompt_token_ids")
        fields = {"prompt_token_ids": prompt, "generation_token_ids": ids, "generation_log_probs": log_probs}
    try:
        out: dict[str, Any] = {
            "prompt_token_ids": [int(t) for t in fields["prompt_token_ids"]],
            "generation_token_ids": [int(t) for t in fields["generation_token_ids"]],
            "generation_log_probs": [float(p) for p in fields["generation_log_probs"]],
        }
    except (TypeError, ValueError) as exc:
        raise TokenInfoError(f"token fields that are not numbers: {exc}") from None
    for key in EXTRA_FIELDS:
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def token_fields_of(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """An output item's token fields, when it carries them."""
    if "prompt_token_ids" not in item:
        return None
    return {k: item[k] for k in (*TOKEN_FIELDS, *EXTRA_FIELDS) if k in item}
