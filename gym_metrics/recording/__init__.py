"""What a rollout keeps besides its reward: the model calls made for it (NeMo Gym's
`ng_model_call_capture`) and their token IDs checked, in NeMo Gym's record shapes (docs/pipelines.md#recording)."""

from gym_metrics.recording._model_calls import (
    CAPTURE_KEY,
    PAYLOAD_KEYS,
    capture_block,
    model_call_metrics,
    model_call_record,
    rollout_id_of,
    token_stats,
)
from gym_metrics.recording._tokens import call_token_fields, token_gaps

__all__ = ["CAPTURE_KEY", "PAYLOAD_KEYS", "capture_block", "model_call_metrics", "model_call_record", "rollout_id_of", "token_stats", "call_token_fields", "token_gaps"]
