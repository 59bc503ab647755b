"""NeMo Gym's row-key names for a rollout's identity (`global_config`'s constants environments
import): the task index, the rollout index, a re-dispatch attempt, an explicit rollout id.
NeMo Gym's global config itself (`get_global_config_dict`) is not mirrored: gym-metrics builds a
server from its own config YAML (gym_metrics.nemo_gym.load_config_server)."""

from __future__ import annotations

TASK_INDEX_KEY_NAME = "_ng_task_index"
ROLLOUT_INDEX_KEY_NAME = "_ng_rollout_index"
ATTEMPT_INDEX_KEY_NAME = "_ng_attempt_index"
ROLLOUT_ID_KEY_NAME = "_ng_rollout_id"

__all__ = ["ATTEMPT_INDEX_KEY_NAME", "ROLLOUT_ID_KEY_NAME", "ROLLOUT_INDEX_KEY_NAME", "TASK_INDEX_KEY_NAME"]
