"""What a rollout keeps besides its reward: the model calls made for it (NeMo Gym's
`ng_model_call_capture`), their token IDs checked, and the trajectory
(`ng_trajectory`), in NeMo Gym's record shapes (docs/pipelines.md#recording)."""

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
from gym_metrics.recording._tokens import call_token_fields, token_gaps
from gym_metrics.recording._trajectory import TRAJECTORY_KEY, EpisodeTrace, task_id_of, trajectory

__all__ = [
    "TRAJECTORY_KEY", "EpisodeTrace", "task_id_of", "trajectory", "model_call_records",
    "CAPTURE_KEY", "PAYLOAD_KEYS", "capture_block", "model_call_metrics", "model_call_record", "rollout_id_of", "token_stats", "call_token_fields", "token_gaps",
]
