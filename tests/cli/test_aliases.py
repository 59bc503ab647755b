"""Names users already import keep working: the NeMo Evaluator-style scorer names at the root
and in gym_metrics.scorers, the reducers' first names (`Metric`, `register_metric`, ...), the
import paths the README documents (`gym_metrics.evaluate`, `gym_metrics.judge`,
`gym_metrics.metrics`) and the old spellings of command-line flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gym_metrics
import gym_metrics.evaluate
import gym_metrics.judge
import gym_metrics.metrics
from gym_metrics import evaluation, reducers, scorers
from gym_metrics.cli import main
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


def test_reducer_names_and_their_first_names_are_the_same_objects() -> None:
    assert gym_metrics.Metric is gym_metrics.Reducer is reducers.Reducer is gym_metrics.metrics.Metric
    assert gym_metrics.MetricResult is gym_metrics.ReducerResult is gym_metrics.metrics.MetricResult
    assert gym_metrics.get_metric is gym_metrics.get_reducer is gym_metrics.metrics.get_metric
    assert gym_metrics.register_metric is gym_metrics.register_reducer is gym_metrics.metrics.register_metric
    assert gym_metrics.metrics.summarize_metrics is reducers.summarize_reducers
    assert gym_metrics.metrics.registered_metrics is reducers.reducer_names
    assert gym_metrics.metrics.resolve_metrics is reducers.resolve_reducers
    assert gym_metrics.metrics.ENTRY_POINT_GROUP == "gym_metrics.metrics"  # the group the README names
    assert gym_metrics.metrics.get_metric("pass@2").compute([[0, 1], [0, 0]]) == 0.5


def test_compare_takes_reducer_and_its_old_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t + r + i) % 2)}
        for i, agent in enumerate("ab")
        for t in range(4)
        for r in range(2)
    ]
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(row) + "\n" for row in rows))
    outputs = []
    for flag in ("--reducer", "--metric"):
        assert main(["compare", str(src), "--agents", "a", "b", flag, "pass@1", "--resamples", "50", "--json"]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] and outputs[0]["comparisons"][0]["metric"] == "pass@1"
