"""What a rollout keeps besides its reward: the model calls made for it (NeMo Gym's
`ng_model_call_capture`), their token IDs checked, the trajectory
(`ng_trajectory`) with its perf summary (`ng_perf`) and its ATIF export, and the token records a trainer reads (TokenEntry, one training sequence),
in NeMo Gym's record shapes (docs/pipelines.md#recording).

Its names are loaded on first use (PEP 562): the trajectory and conversation-item models are
pydantic models by the dozen, about 50 ms of `collect`'s start-up that a run which records
nothing never needs."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gym_metrics.recording._atif import ATIF_SCHEMA_VERSION, rollout_to_atif
    from gym_metrics.recording._items import TOKEN_FIELDS
    from gym_metrics.recording._atif_json import AtifRefused
    from gym_metrics.recording._atif_export import AtifExport, AtifExportError, export_atif
    from gym_metrics.recording._model_calls import (
        CAPTURE_KEY,
        PAYLOAD_KEYS,
        capture_block,
        model_call_metrics,
        model_call_records,
        model_call_record,
        rollout_id_of,
        token_stats,
    )
    from gym_metrics.recording._token_records import (
        TokenLineageError,
        TrainingSequence,
        encode_token_ids,
        linearize,
        token_digest,
        token_entries,
    )
    from gym_metrics.recording._conversation_items import ITEM_MODELS, ConversationItem
    from gym_metrics.recording._sdk_items import own_dump
    from gym_metrics.recording._perf import PERF_KEY, rollout_perf
    from gym_metrics.recording._tokens import call_token_fields, token_gaps
    from gym_metrics.recording._trajectory import OBSERVATIONS_KEY, TRAJECTORY_KEY, EpisodeTrace, agent_trajectory, session_observations, task_id_of, trajectory
    from gym_metrics.recording._trajectory_schema import canonical_trajectory, trajectory_error

_WHERE: dict[str, str] = {
    **dict.fromkeys(("ATIF_SCHEMA_VERSION", "rollout_to_atif"), "_atif"),
    **dict.fromkeys(("TOKEN_FIELDS",), "_items"),
    **dict.fromkeys(("AtifRefused",), "_atif_json"),
    **dict.fromkeys(("AtifExport", "AtifExportError", "export_atif"), "_atif_export"),
    **dict.fromkeys(("CAPTURE_KEY", "PAYLOAD_KEYS", "capture_block", "model_call_metrics", "model_call_records", "model_call_record", "rollout_id_of", "token_stats"), "_model_calls"),
    **dict.fromkeys(("TokenLineageError", "TrainingSequence", "encode_token_ids", "linearize", "token_digest", "token_entries"), "_token_records"),
    **dict.fromkeys(("ITEM_MODELS", "ConversationItem"), "_conversation_items"),
    **dict.fromkeys(("own_dump",), "_sdk_items"),
    **dict.fromkeys(("PERF_KEY", "rollout_perf"), "_perf"),
    **dict.fromkeys(("call_token_fields", "token_gaps"), "_tokens"),
    **dict.fromkeys(("OBSERVATIONS_KEY", "TRAJECTORY_KEY", "EpisodeTrace", "agent_trajectory", "session_observations", "task_id_of", "trajectory"), "_trajectory"),
    **dict.fromkeys(("canonical_trajectory", "trajectory_error"), "_trajectory_schema"),
}
"""Each public name's submodule."""


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # (once: later lookups find it directly)
    return value


__all__ = [
    "canonical_trajectory",
    "ConversationItem",
    "ITEM_MODELS",
    "own_dump",
    "trajectory_error",
    "ATIF_SCHEMA_VERSION", "TOKEN_FIELDS", "AtifRefused", "rollout_to_atif", "AtifExport", "AtifExportError", "export_atif",
    "OBSERVATIONS_KEY", "TRAJECTORY_KEY", "EpisodeTrace", "agent_trajectory", "session_observations", "task_id_of", "trajectory", "model_call_records", "PERF_KEY", "rollout_perf",
    "TokenLineageError", "TrainingSequence", "encode_token_ids", "linearize", "token_digest", "token_entries",
    "CAPTURE_KEY", "PAYLOAD_KEYS", "capture_block", "model_call_metrics", "model_call_record", "rollout_id_of", "token_stats", "call_token_fields", "token_gaps",
]
