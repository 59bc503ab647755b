"""Each model call's token IDs and log-probs checked, per rollout: a call that should carry
them and does not, IDs and log-probs of different lengths, IDs that two sources of one answer
give differently (`token_ids_disagree`), and a prompt that does not begin
with the previous call's prompt and generation (a break in the token lineage a trainer would
otherwise stitch wrongly) are each an observation gap, `{"code", "detail"}` as NeMo Gym writes
them; nothing is dropped or repaired."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gym_metrics.targets import Exchange, TokenInfoError, chat_token_fields, token_fields_of


def call_token_fields(exchange: Exchange) -> dict[str, Any]:
    """The token fields of one answered call (a chat answer's, or a Responses answer's last
    output item's); TokenInfoError when it has none."""
    response = exchange.response
    if not isinstance(response, dict):
        raise TokenInfoError("no answer" if response is None else f"the answer is {type(response).__name__}, not an object")
    if exchange.dialect == "chat":
        return chat_token_fields(response)
    output = response.get("output")
    last = output[-1] if isinstance(output, list) and output else None
    fields = token_fields_of(last) if isinstance(last, dict) else None
    if fields is None:
        raise TokenInfoError("the answer's last output item carries no prompt_token_ids")
    return fields


def token_gaps(exchanges: Sequence[Exchange]) -> list[dict[str, str]]:
    """The gaps of a rollout's answered calls, in call order (see the module docstring)."""
    gaps: list[dict[str, str]] = []
    before: list[int] | None = None
    before_index = -1
    for i, exchange in enumerate(exchanges):
        if exchange.response is None:
            continue  # a failed attempt: nothing was generated
        if exchange.masked:
            gaps.append({"code": "token_ids_masked", "detail": f"model call {i}: the answer spelled the policy's API key: it is "
                         "masked, and the call's token IDs and log-probs (which spell it too) were dropped"})  # fmt: skip
            before = None
            continue
        try:
            fields = call_token_fields(exchange)
        except TokenInfoError as exc:
            gaps.append({"code": exc.code, "detail": f"model call {i}: {exc}"})
            before = None
            continue
        prompt, ids, log_probs = fields["prompt_token_ids"], fields["generation_token_ids"], fields["generation_log_probs"]
        if len(ids) != len(log_probs):
            gaps.append({"code": "token_log_probs_length_mismatch", "detail": f"model call {i}: {len(ids)} token ids, {len(log_probs)} log-probs"})
        if before is not None and prompt[: len(before)] != before:
            at = next((k for k, (a, b) in enumerate(zip(prompt, before)) if a != b), min(len(prompt), len(before)))
            gaps.append({
                "code": "token_lineage_break",
                "detail": f"model call {i}: its prompt does not begin with model call {before_index}'s prompt and generation "
                f"(first difference at token {at} of {len(before)})",
            })  # fmt: skip
        before, before_index = [*prompt, *ids], i
    return gaps
