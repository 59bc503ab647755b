"""LLM-judge scorers (docs/metrics.md#judge-scorers) through any OpenAI-compatible endpoint.

`topic_adherence`, `agent_goal_accuracy`, `answer_accuracy` and `trajectory` replicate what
NeMo Evaluator reports (RAGAS 0.4.3 / NeMo Agent Toolkit underneath). Each metric's config is
a JudgeConfig (endpoint, model, key variable, temperature, limits) plus its own options.
"""

from __future__ import annotations

from gym_metrics.scorers.judge._answer_accuracy import AnswerAccuracy, AnswerAccuracyConfig
from gym_metrics.scorers.judge._client import JudgeClient, JudgeError
from gym_metrics.scorers.judge._config import JudgeConfig
from gym_metrics.scorers.judge._goal_accuracy import AgentGoalAccuracy, AgentGoalAccuracyConfig
from gym_metrics.scorers.judge._base import JudgeScorer, JudgeScorerConfig
from gym_metrics.scorers.judge._nat import nat_average_score
from gym_metrics.scorers.judge._topic_adherence import TopicAdherence, TopicAdherenceConfig
from gym_metrics.scorers.judge._trajectory import TrajectoryConfig, TrajectoryEvaluation

from gym_metrics._util.deprecated import old_names

__all__ = [
    "AgentGoalAccuracy",
    "AgentGoalAccuracyConfig",
    "AnswerAccuracy",
    "AnswerAccuracyConfig",
    "JudgeClient",
    "JudgeConfig",
    "JudgeError",
    "JudgeScorer",
    "JudgeScorerConfig",
    "TopicAdherence",
    "TopicAdherenceConfig",
    "TrajectoryConfig",
    "TrajectoryEvaluation",
    "nat_average_score",
]


__getattr__ = old_names(__name__)
