"""Token records for trainers, from a rollout row written with `collect --capture-tokens`:
NeMo Gym's `TokenEntry` per model call (`nemo_gym/token_id_capture/records.py`, schema 1: its
field names, its digest and its lineage), and the rollout as one training sequence (token IDs,
log-probs, and a loss mask that is 1 on generated tokens only), as NeMo RL builds it from a
NeMo Gym rollout's output items.

The digest is NeMo Gym's, byte for byte: SHA-256 over `b"nemo-gym-tokens"`, then a version
byte 1, the count as an 8-byte big-endian unsigned integer and each ID as one (an empty list:
the domain alone), over a call's prompt and generation IDs. A call's parent is the previous
call whose IDs its prompt begins with (`resolved`); the first call is the `root`; a call whose
prompt does not begin with the previous call's IDs is `unresolved` (a lineage break).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOKEN_ENTRY_SCHEMA_VERSION = 1
DIGEST_VERSION = 1
_DOMAIN = b"nemo-gym-tokens"
_ARRAYS = ("prompt_token_ids", "generation_token_ids", "generation_log_probs", "routed_experts")


class TokenLineageError(ValueError):
    """A rollout whose turns cannot be laid end to end (the message names the turn)."""


def encode_token_ids(ids: Sequence[int]) -> bytes:
    """NeMo Gym's versioned big-endian encoding of a list of token IDs."""
    if any(not 0 <= i < 2**64 for i in ids):
        raise ValueError("token ids must be unsigned 64-bit integers")
    return struct.pack(">BQ", DIGEST_VERSION, len(ids)) + struct.pack(f">{len(ids)}Q", *ids)


def token_digest(ids: Sequence[int]) -> str:
    """NeMo Gym's digest of token IDs (see the module docstring)."""
    if not ids:
        return hashlib.sha256(_DOMAIN).hexdigest()
    return hashlib.sha256(_DOMAIN + encode_token_ids(ids)).hexdigest()


def _turns(row: Mapping[str, Any]) -> list[tuple[int, Mapping[str, Any]]]:
    """The output items that carry a turn's token arrays, with their positions."""
    output = (row.get("response") or {}).get("output") or []
    return [(n, item) for n, item in enumerate(output) if isinstance(item, Mapping) and "generation_token_ids" in item]


def token_entries(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One NeMo Gym `TokenEntry` per turn of the rollout, in order, with its lineage."""
    capture = row.get("ng_model_call_capture") or {}
    answered = [c for c in capture.get("calls") or () if c.get("status_code") == 200]
    rollout_id = capture.get("rollout_id") or f"{row.get('_ng_task_index')}-{row.get('_ng_rollout_index')}"
    output = (row.get("response") or {}).get("output") or []
    entries: list[dict[str, Any]] = []
    start = 0
    for k, (n, item) in enumerate(_turns(row)):
        call = answered[k] if k < len(answered) else {}
        prompt, generated = list(item["prompt_token_ids"]), list(item["generation_token_ids"])
        cumulative = [*prompt, *generated]
        parent = entries[-1] if entries else None
        if parent is None:
            resolution, parent_id = "root", None
        elif parent["cum_len"] <= len(prompt) and token_digest(prompt[: parent["cum_len"]]) == parent["digest"]:
            resolution, parent_id = "resolved", parent["model_call_id"]
        else:
            resolution, parent_id = "unresolved", None
        items = [{key: value for key, value in dict(i).items() if key not in _ARRAYS} for i in output[start : n + 1]]
        entries.append({
            "schema_version": TOKEN_ENTRY_SCHEMA_VERSION, "rollout_id": rollout_id,
            "model_call_id": call.get("model_call_id") or f"{rollout_id}-turn-{k}", "model": call.get("model") or "",
            "prompt_token_ids": prompt, "generation_token_ids": generated,
            "generation_log_probs": list(item["generation_log_probs"]), "routed_experts": item.get("routed_experts"),
            "output_items": items, "token_item_index": len(items) - 1, "response_id": call.get("response_id"),
            "created_at": call.get("completed_at") or 0.0, "parent_call_id": parent_id, "cum_len": len(cumulative),
            "digest": token_digest(cumulative), "parent_resolution": resolution,
        })  # fmt: skip
        start = n + 1
    return entries


@dataclass(frozen=True)
class TrainingSequence:
    """A rollout laid end to end for a trainer: position i's token, its log-prob (0.0 where the
    policy did not generate it) and whether the loss counts it (1 on generated tokens only)."""

    token_ids: list[int]
    log_probs: list[float]
    loss_mask: list[int]
    prompt_length: int = 0
    """How many tokens the first turn's prompt is: what a trainer that splits a sample into
    prompt and completion (TRL, verl) takes as the prompt."""


def linearize(row: Mapping[str, Any]) -> TrainingSequence:
    """The rollout's turns as one sequence, as NeMo RL builds it from NeMo Gym's output items:
    each turn that generated adds the part of its prompt not seen yet (mask 0) and its
    generation (mask 1), a turn that generated nothing adds nothing; TokenLineageError when a
    turn's prompt does not begin with everything seen so far, or its IDs and log-probs differ in
    length."""
    ids: list[int] = []
    log_probs: list[float] = []
    mask: list[int] = []
    for k, (_, item) in enumerate(_turns(row)):
        prompt, generated, probs = item["prompt_token_ids"], item["generation_token_ids"], item["generation_log_probs"]
        if not generated:  # nothing to train on (NeMo RL skips it: its prompt joins the next turn's)
            continue
        if list(prompt[: len(ids)]) != ids:
            raise TokenLineageError(f"turn {k}: its prompt does not begin with the {len(ids)} tokens of the turns before it")
        if len(generated) != len(probs):
            raise TokenLineageError(f"turn {k}: {len(generated)} generated token ids, {len(probs)} log-probs")
        new = list(prompt[len(ids) :])
        ids += [*new, *generated]
        log_probs += [0.0] * len(new) + [float(p) for p in probs]
        mask += [0] * len(new) + [1] * len(generated)
    first = next((len(item["prompt_token_ids"]) for _, item in _turns(row) if item["generation_token_ids"]), 0)
    return TrainingSequence(ids, log_probs, mask, first)
