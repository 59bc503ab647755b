"""The score functions of NeMo Gym environments' compute_metrics (mcqa, code_gen, math_with_judge,
imo_proofbench), by name: the reward_profile reference script (run in a nemo-gym venv) and
tests/nemo_gym/test_reward_profile.py both call the helpers with these."""

from __future__ import annotations

from typing import Callable, Dict


def _imo(r: dict) -> dict:
    sym = (r.get("symbolic_correct") or 0.0) >= 0.5
    judge = (r.get("judge_correct") or 0.0) >= 0.5
    points = r.get("judge_points")
    return {
        "any_correct": 1.0 if sym or judge else 0.0,
        "symbolic_correct": 1.0 if sym else 0.0,
        "judge_correct": 1.0 if judge else 0.0,
        "judge_score_7": 1.0 if points == 7 else 0.0,
        "judge_score_0": 1.0 if points == 0 else 0.0,
    }


def _math_with_judge(r: dict) -> dict:
    scores = {}
    if "library_reward" in r:
        scores["symbolic_accuracy"] = r["library_reward"]
    if "judge_evaluations" in r and r["judge_evaluations"] is not None:
        scores["judge_accuracy"] = r["reward"]
    return scores


SCORE_FNS: Dict[str, Callable[[dict], dict]] = {
    "reward_accuracy": lambda r: {"accuracy": r["reward"]},  # mcqa, graphwalks
    "code_gen": lambda r: {"accuracy": float(r["reward"] > 0)},
    "math_with_judge": _math_with_judge,
    "imo_proofbench": _imo,
    "scores": lambda r: r["scores"],  # the rollout carries its score dict (edge cases)
    # the same, each NaN a new object (as `float("nan")` in a score function makes them; JSON's are one)
    "scores_fresh_nan": lambda r: {k: v + 0.0 if isinstance(v, float) and v != v else v for k, v in r["scores"].items()},
}
