"""Names users already import keep working: the NeMo Evaluator-style scorer names at the root
and in gym_metrics.scorers, and the import paths the README documents (`gym_metrics.evaluate`,
`gym_metrics.judge`)."""

from __future__ import annotations

import gym_metrics
import gym_metrics.evaluate
import gym_metrics.judge
from gym_metrics import evaluation, scorers
from gym_metrics.scorers import judge


def test_scorer_names_and_their_nemo_evaluator_aliases_are_the_same_objects() -> None:
    assert gym_metrics.RowMetric is gym_metrics.Scorer is scorers.Scorer
    assert gym_metrics.register_row_metric is gym_metrics.register_scorer is scorers.register_scorer
    assert gym_metrics.get_row_metric is gym_metrics.get_scorer is scorers.get_scorer
    assert scorers.row_metric_names is scorers.scorer_names


def test_the_evaluate_module_still_serves_what_the_readme_shows() -> None:
    from gym_metrics.evaluate import evaluate

    assert evaluate is evaluation.evaluate
    assert gym_metrics.evaluate.evaluate_async is evaluation.evaluate_async
    assert gym_metrics.evaluate.EvaluationResult is evaluation.EvaluationResult
    assert gym_metrics.evaluate.RowError is scorers.RowError
    assert gym_metrics.evaluate.get_row_metric is scorers.get_scorer
    result = evaluate("tool_call_accuracy", [{"user_input": [], "reference_tool_calls": []}])
    assert result.score_names == ("tool_call_accuracy",) and len(result) == 1


def test_the_judge_module_still_serves_nat_average_score() -> None:
    assert gym_metrics.judge.nat_average_score is judge.nat_average_score
    assert set(gym_metrics.judge.__all__) == set(judge.__all__)
