"""gym_metrics.nemo_gym.reward_profile gives NeMo Gym 0.7.0's numbers, keys and key order.

The cases (tests/data/nemo_gym_reward_profile/cases.json) hold inputs and NeMo Gym's outputs,
written by scripts/make_nemo_reward_profile_reference.py in a throwaway nemo-gym venv.
"""

from __future__ import annotations

import json
import sys
import math
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

from gym_metrics.nemo_gym.reward_profile import (
    add_avg_sample_std_dev,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    highest_k_metrics,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from nemo_reward_profile_scores import SCORE_FNS  # noqa: E402

CASES = json.loads((Path(__file__).resolve().parents[1] / "data" / "nemo_gym_reward_profile" / "cases.json").read_text())
HELPERS: Dict[str, Callable[..., Any]] = {
    "compute_pass_majority_metrics": compute_pass_majority_metrics,
    "compute_subset_metrics": compute_subset_metrics,
    "highest_k_metrics": highest_k_metrics,
    "add_avg_sample_std_dev": add_avg_sample_std_dev,
}




def assert_same(ours: Any, theirs: Any, where: str = "") -> None:
    """Equal structure and key order; floats to relative 1e-12 (NaN equals NaN, 0 only 0)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict), where
        assert list(ours) == list(theirs), f"{where}: keys differ: {sorted(set(ours) ^ set(theirs))}"
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}/{key}")
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    elif isinstance(theirs, float) and math.isnan(theirs):
        assert isinstance(ours, float) and math.isnan(ours), f"{where}: {ours!r} != NaN"
    elif isinstance(theirs, (int, float)) and not isinstance(theirs, bool):
        assert ours == pytest.approx(theirs, rel=1e-12, abs=0.0), f"{where}: {ours!r} != {theirs!r}"
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_nemo_gym_case(case: Dict[str, Any]) -> None:
    kwargs = dict(case["kwargs"])
    if case["score_fn"] is not None:
        kwargs["score_fn"] = SCORE_FNS[case["score_fn"]]
    helper = HELPERS[case["call"]]
    if "raises" in case:
        with pytest.raises(Exception) as caught:
            helper(**kwargs)
        assert type(caught.value).__name__ == case["raises"]
        return
    result = helper(**kwargs)
    if case["call"] == "add_avg_sample_std_dev":
        assert result is None
        result = kwargs["metrics"]
    assert_same(result, case["result"], case["id"])


def test_cases_cover_every_helper_and_the_edges() -> None:
    assert {case["call"] for case in CASES} == set(HELPERS)
    assert sum("raises" in case for case in CASES) >= 3


def _tasks(rewards: List[List[float]], answers: List[List[Any]]) -> List[List[Dict[str, Any]]]:
    return [[{"reward": r, "ans": a} for r, a in zip(rs, ans)] for rs, ans in zip(rewards, answers)]


def test_empty_input_and_tasks_without_rollouts() -> None:
    assert compute_pass_majority_metrics([]) == ({}, [], [], 0)
    assert compute_pass_majority_metrics([[], []]) == ({"per_sample_aggregate": {}}, [[], []], [], 0)
    assert compute_subset_metrics([], "x") == {}
    assert highest_k_metrics({}, "pass@{k}") == {}


def test_unbiased_pass_at_k_and_k_above_a_tasks_rollouts() -> None:
    tasks = _tasks([[1, 0, 0, 0], [0, 1]], [[None] * 4, [None] * 2])
    metrics = compute_pass_majority_metrics(tasks)[0]
    assert metrics["pass@2/accuracy"] == pytest.approx(100.0 * ((1 - 3 / 6) + 1.0) / 2)
    assert metrics["pass@3/accuracy"] == pytest.approx(100.0 * (1 - 1 / 4))  # the 2-rollout task is left out
    assert metrics["pass@1[avg-of-4]/accuracy"] == pytest.approx(100.0 * (0.25 + 0.5) / 2)  # but kept here


def test_majority_ties_average_the_tied_pairs_and_no_answer_counts_zero() -> None:
    tasks = _tasks([[1, 0, 1, 0], [1, 1]], [["A", "B", "A", "B"], [None, None]])
    metrics, scores, names, max_k = compute_pass_majority_metrics(tasks, answer_key="ans")
    assert metrics["majority@4/accuracy"] == 25.0  # task 0 ties 0.5, task 1 has no answer: 0
    assert metrics["majority@1/accuracy"] == 50.0
    assert names == ["accuracy", "no_answer"] and max_k == 4
    assert scores[1] == [{"accuracy": 1, "no_answer": 1}] * 2


def test_bools_become_ints_and_continuous_pass_at_k_is_best_of_first_k() -> None:
    tasks = [[{"s": {"ok": True, "f1": 0.2}}, {"s": {"ok": False, "f1": 0.9}}]]
    metrics, scores, _, _ = compute_pass_majority_metrics(tasks, score_fn=lambda r: r["s"])
    assert type(scores[0][0]["ok"]) is int
    assert metrics["pass@1/f1"] == pytest.approx(20.0) and metrics["pass@2/f1"] == pytest.approx(90.0)


def test_nan_counts_in_max_only_when_first() -> None:
    nan = float("nan")
    first = compute_pass_majority_metrics([[{"reward": nan}, {"reward": 0.5}]])[0]
    later = compute_pass_majority_metrics([[{"reward": 0.5}, {"reward": nan}]])[0]
    assert math.isnan(first["pass@2/accuracy"]) and later["pass@2/accuracy"] == 50.0


def test_constant_scores_have_exactly_zero_spread() -> None:
    tasks = [[{"reward": 0.1}] * 7, [{"reward": 0.55}] * 7]  # a plain left-to-right sum is off by an ulp
    metrics, scores, names, max_k = compute_pass_majority_metrics(tasks)
    add_avg_sample_std_dev(metrics, scores, names, max_k)
    assert metrics["pass@1[avg-of-7]/accuracy/std_dev_across_runs"] == 0.0
    assert metrics["pass@1[avg-of-7]/accuracy/avg_sample_std_dev"] == 0.0


def test_sums_are_compensated_as_python_3_12_sums_are() -> None:
    within = compute_pass_majority_metrics([[{"reward": 1e16}, {"reward": 1.0}, {"reward": -1e16}]])[0]
    across = compute_pass_majority_metrics([[{"reward": 1e16}], [{"reward": 1.0}], [{"reward": -1e16}]])[0]
    assert within["pass@1[avg-of-3]/accuracy"] == pytest.approx(100.0 / 3)
    assert across["pass@1/accuracy"] == pytest.approx(100.0 / 3)


def test_non_numeric_scores_and_unhashable_answers_raise() -> None:
    with pytest.raises(TypeError):
        compute_pass_majority_metrics([[{"reward": None}]])
    with pytest.raises(TypeError):
        compute_pass_majority_metrics([[{"reward": "1.0"}]])
    with pytest.raises(TypeError):
        compute_pass_majority_metrics([[{"reward": 1.0, "ans": ["x"]}]], answer_key="ans")


def test_highest_k_skips_spreads_and_applies_filters() -> None:
    am = {"pass@4/a": 1.0, "pass@8/a": 2.0, "pass@8/b": 3.0, "pass@16/a/std_dev_across_runs": 4.0}
    assert highest_k_metrics(am, "pass@{k}") == {"pass@8/a": 2.0, "pass@8/b": 3.0}
    assert highest_k_metrics(am, "pass@{k}", score_names=["a"], exclude_names=["a"]) == {}
    assert highest_k_metrics(am, "pass@{k}", exclude_names=["b"]) == {"pass@8/a": 2.0}
