"""Rewards for RL trainers from a gym-metrics server: one module per trainer, each importing
nothing of its trainer at load (`gym_metrics.integrations.trl`, `.verl`, `.nemo_rl`,
`.verifiers`), over one shared, batching reward client (docs/training.md)."""

from gym_metrics.integrations._client import RewardClient, RewardFailure, Scored, reward_client
from gym_metrics.integrations._mapping import OnFailure, RowMapping, settle

__all__ = ["OnFailure", "RewardClient", "RewardFailure", "RowMapping", "Scored", "reward_client", "settle"]
