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
    choice = completion["choices"][0]
    message = choice.get("message") or {}
    prompt, generated = completion.get("prompt_token_ids"), choice.get("token_ids")
    if (prompt is None) != (generated is None):
        raise TokenInfoError(f"the answer has {'prompt_token_ids' if generated is None else 'choice.token_ids'} without "
                             f"{'choice.token_ids' if generated is None else 'prompt_token_ids'}")  # fmt: skip
    present = [k for k in TOKEN_FIELDS if k in message]
    if present:
        if len(present) < len(TOKEN_FIELDS):
            raise TokenInfoError(f"the message carries {', '.join(present)} without {', '.join(k for k in TOKEN_FIELDS if k not in present)}")
        out = _numbers(message["prompt_token_ids"], message["generation_token_ids"], message["generation_log_probs"])
        if prompt is not None and (_ids(prompt) != out["prompt_token_ids"] or _ids(generated) != out["generation_token_ids"]):
            raise TokenInfoError("the message's token IDs disagree with the answer's prompt_token_ids / choice.token_ids", "token_ids_disagree")
    else:
        content = (choice.get("logprobs") or {}).get("content")
        if not isinstance(content, list):
            raise TokenInfoError("the answer carries no log-probs (choice.logprobs.content): is the policy vLLM >= 0.10.2?")
        if prompt is None:
            raise TokenInfoError("the answer carries no prompt_token_ids (vLLM's return_token_ids)")
        from_log_probs = _ids(str(e.get("token")).removeprefix("token_id:") if isinstance(e, Mapping) else e for e in content)
        out = _numbers(prompt, generated, [e.get("logprob") if isinstance(e, Mapping) else e for e in content])
        ids = out["generation_token_ids"]
        if ids[: len(from_log_probs)] != from_log_probs[: len(ids)]:  # (a count that differs is the length gap's)
            raise TokenInfoError("choice.token_ids disagree with the log-probs' tokens (logprobs.content[*].token)", "token_ids_disagree")
    for key in EXTRA_FIELDS:
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def _ids(values: Any) -> list[int]:
    try:
        return [int(t) for t in values]
    except (TypeError, ValueError) as exc:
        raise TokenInfoError(f"token IDs that are not integers: {exc}") from None


def _numbers(prompt: Any, generated: Any, log_probs: Any) -> dict[str, Any]:
    try:
        return {"prompt_token_ids": _ids(prompt), "generation_token_ids": _ids(generated),
                "generation_log_probs": [float(p) for p in log_probs]}  # fmt: skip
    except (TypeError, ValueError) as exc:
        raise TokenInfoError(f"log-probs that are not numbers: {exc}") from None


def token_fields_of(item: Mapping[str, Any]) -> dict[str, Any] | None:
    """An output item's token fields, when it carries them."""
    if "prompt_token_ids" not in item:
        return None
    return {k: item[k] for k in (*TOKEN_FIELDS, *EXTRA_FIELDS) if k in item}
