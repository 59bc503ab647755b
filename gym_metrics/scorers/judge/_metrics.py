"""Importing this module registers the built-in judge metrics (see evaluate._registry)."""

from gym_metrics.scorers.judge._answer_accuracy import AnswerAccuracy
from gym_metrics.scorers.judge._goal_accuracy import AgentGoalAccuracy
from gym_metrics.scorers.judge._topic_adherence import TopicAdherence
from gym_metrics.scorers.judge._trajectory import TrajectoryEvaluation

JUDGE_METRICS = (TopicAdherence, AgentGoalAccuracy, AnswerAccuracy, TrajectoryEvaluation)
"""The judge metric classes, in documentation order."""
