"""Old name of `gym_metrics.scorers.judge` (removal in 0.3.0): the LLM-judge scorers under
their first import path. `JudgeMetric` and `JudgeMetricConfig` warn and resolve through
gym_metrics._util.deprecated."""

from __future__ import annotations

from gym_metrics._util.deprecated import old_names, warn_module

warn_module(__name__)

from gym_metrics.scorers.judge import (  # noqa: E402
    AgentGoalAccuracy,
    AgentGoalAccuracyConfig,
    AnswerAccuracy,
    AnswerAccuracyConfig,
    JudgeClient,
    JudgeConfig,
    JudgeError,
    TopicAdherence,
    TopicAdherenceConfig,
    TrajectoryConfig,
    TrajectoryEvaluation,
    nat_average_score,
)


__getattr__ = old_names(__name__)


__all__ = [
    "AgentGoalAccuracy",
    "AgentGoalAccuracyConfig",
    "AnswerAccuracy",
    "AnswerAccuracyConfig",
    "JudgeClient",
    "JudgeConfig",
    "JudgeError",
    "TopicAdherence",
    "TopicAdherenceConfig",
    "TrajectoryConfig",
    "TrajectoryEvaluation",
    "nat_average_score",
]
