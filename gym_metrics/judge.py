"""The LLM-judge scorers under their first import path (`gym_metrics.judge.nat_average_score`
keeps working); the code lives in gym_metrics.scorers.judge."""

from __future__ import annotations

from gym_metrics.scorers.judge import (
    AgentGoalAccuracy,
    AgentGoalAccuracyConfig,
    AnswerAccuracy,
    AnswerAccuracyConfig,
    JudgeClient,
    JudgeConfig,
    JudgeError,
    JudgeMetric,
    JudgeMetricConfig,
    TopicAdherence,
    TopicAdherenceConfig,
    TrajectoryConfig,
    TrajectoryEvaluation,
    nat_average_score,
)

__all__ = [
    "AgentGoalAccuracy",
    "AgentGoalAccuracyConfig",
    "AnswerAccuracy",
    "AnswerAccuracyConfig",
    "JudgeClient",
    "JudgeConfig",
    "JudgeError",
    "JudgeMetric",
    "JudgeMetricConfig",
    "TopicAdherence",
    "TopicAdherenceConfig",
    "TrajectoryConfig",
    "TrajectoryEvaluation",
    "nat_average_score",
]
