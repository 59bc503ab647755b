"""Rewards for RL trainers from a gym-metrics server: one module per trainer, each importing
nothing of its trainer at load (`gym_metrics.integrations.trl`, `.verl`, `.nemo_rl`,
`.verifiers`, `.openrlhf`), over one shared, batching reward client, one row mapping, one way
to group a prompt's completions and one failure policy; and for episodes gym-metrics runs, one
training sequence per episode (`trained_sequence`, from `recording.linearize`) (docs/training.md)."""

from gym_metrics.integrations._client import RewardClient, RewardFailure, Scored, reward_client
from gym_metrics.integrations._mapping import (
    OnFailure,
    RolloutFailed,
    RowMapping,
    Span,
    check_on_failure,
    consecutive_runs,
    group_consecutive,
    plain_value,
    settle,
    trained_sequence,
)

__all__ = [
    "OnFailure", "RewardClient", "RewardFailure", "RolloutFailed", "RowMapping", "Scored", "Span", "check_on_failure",
    "consecutive_runs", "group_consecutive", "plain_value", "reward_client", "settle", "trained_sequence",
]  # fmt: skip
