"""Write NeMo Gym 0.7.0's outputs of its reward_profile helpers (conformance reference data).

A tool for producing test data, not part of gym-metrics: it imports nemo-gym (Python >= 3.13,
not a project dependency). Run it with a throwaway interpreter that has nemo-gym installed:

    python3.13 -m venv /tmp/ngvenv && /tmp/ngvenv/bin/pip install nemo-gym==0.7.0
    /tmp/ngvenv/bin/python scripts/make_nemo_reward_profile_reference.py [--check]

It builds seeded inputs (binary, continuous, ragged, missing and None answers, ties, NaN, bools,
k above the rollout count, empty input), plus the call patterns of real environments (mcqa,
graphwalks, code_gen, math_with_judge, imo_proofbench_judge `compute_metrics` and
`get_key_metrics`), calls `compute_pass_majority_metrics`, `add_avg_sample_std_dev`,
`compute_subset_metrics` and `highest_k_metrics`, and writes
tests/data/nemo_gym_reward_profile/cases.json: a list of
`{id, call, score_fn, kwargs, result | raises}`. `score_fn` names one of SCORE_FNS
(scripts/nemo_reward_profile_scores.py, which the test imports too). NaN is written as the `NaN` literal (Python's json).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nemo_reward_profile_scores import SCORE_FNS  # noqa: E402

from nemo_gym.reward_profile import (  # noqa: E402
    add_avg_sample_std_dev,
    compute_pass_majority_metrics,
    compute_subset_metrics,
    highest_k_metrics,
)

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "nemo_gym_reward_profile" / "cases.json"
NAN = float("nan")




def _tasks(rng: random.Random, n_tasks: int, k_range: tuple, make: Callable[[random.Random], dict]) -> List[List[dict]]:
    return [[make(rng) for _ in range(rng.randint(*k_range))] for _ in range(n_tasks)]


def _mcqa_row(rng: random.Random) -> dict:
    answer = rng.choice(["A", "B", "C", "D", None])
    return {"reward": float(answer == "A"), "extracted_answer": answer}


def _graphwalks_row(rng: random.Random) -> dict:
    return {"reward": rng.choice([0.0, 1.0, round(rng.random(), 3), 2 / 3]), "problem_type": rng.choice(["bfs", "parents", ""])}


def _code_row(rng: random.Random) -> dict:
    code = rng.choice(["def f(): return 1", "def f(): return 2", None])
    row = {"reward": rng.choice([0.0, 0.5, 1.0]) if code else 0.0, "extracted_model_code": code}
    if rng.random() < 0.9:
        row["difficulty"] = rng.choice(["easy", "medium", "hard", None])
    return row


def _math_row(rng: random.Random) -> dict:
    row: dict = {"reward": rng.choice([0.0, 1.0]), "extracted_answer": rng.choice(["42", "41", "7", None])}
    if rng.random() < 0.8:
        row["library_reward"] = rng.choice([0.0, 1.0])
    row["judge_evaluations"] = rng.choice([None, [{"verdict": "A=B"}]])
    return row


def _imo_row(rng: random.Random) -> dict:
    return {
        "symbolic_correct": rng.choice([0.0, 1.0, None]),
        "judge_correct": rng.choice([0.0, 1.0]),
        "judge_points": rng.choice([0, 1, 6, 7, None]),
        "extracted_answer": rng.choice(["x", "y", None]),
        "category": rng.choice(["Algebra", "Geometry"]),
        "level": rng.choice(["IMO-easy", "IMO-hard"]),
    }


def _edge_rows() -> Dict[str, List[List[dict]]]:
    """Hand-made score dicts: NaN first / later, bools, ints, negative, missing names, ties,
    equal answers of different types, constant non-binary scores, empty tasks."""
    s = lambda scores, answer="A": {"scores": scores, "answer": answer}  # noqa: E731
    return {
        "nan_first_and_later": [[s({"a": NAN}), s({"a": 0.3})], [s({"a": 0.2}), s({"a": NAN}), s({"a": 0.9})]],
        "bools_ints_negative": [[s({"a": True, "b": 3}), s({"a": False, "b": -1})], [s({"a": True, "b": 0})]],
        "missing_names": [[s({"a": 1.0}), s({"b": 0.5}), s({"a": 0.0, "b": 1.0})], [s({"b": 0.25})], [s({})]],
        "tie_two_answers": [[s({"a": 1}, "A"), s({"a": 0}, "B"), s({"a": 1}, "A"), s({"a": 0}, "B")]],
        "same_answer_two_scores": [[s({"a": 1.0}, "A"), s({"a": 0.0}, "A"), s({"a": 0.5}, "B")]],
        "answers_1_1p0_true": [[s({"a": 1}, 1), s({"a": 1}, 1.0), s({"a": 0}, True), s({"a": 0}, "1")]],
        "constant_continuous": [[s({"a": 0.7})] * 4, [s({"a": 0.1})] * 7, [s({"a": 0.55})] * 6],
        "cancellation_within_task": [[s({"a": 1e16}), s({"a": 1.0}), s({"a": -1e16})]],
        "cancellation_across_tasks": [[s({"a": 1e16}), s({"a": 2.0})], [s({"a": 1.0}), s({"a": 1.0})], [s({"a": -1e16})]],
        "empty_task_inside": [[], [s({"a": 1.0}), s({"a": 0.0})], [s({"a": 0.0}, None)]],
        "all_tasks_empty": [[], []],
        "all_answers_none": [[s({"a": 1.0}, None), s({"a": 0.0}, None)]],
        "negative_zero_and_inf": [[s({"a": -0.0}), s({"a": 0.0})], [s({"a": float("inf")}), s({"a": 1.0})]],
        "nan_answer_scores": [[s({"a": NAN}, "A"), s({"a": NAN}, "A"), s({"a": 1.0}, "B")]],
    }


def _call(case_id: str, call: str, fn: Optional[str], kwargs: Dict[str, Any]) -> dict:
    helper = {
        "compute_pass_majority_metrics": compute_pass_majority_metrics,
        "compute_subset_metrics": compute_subset_metrics,
        "highest_k_metrics": highest_k_metrics,
        "add_avg_sample_std_dev": add_avg_sample_std_dev,
    }[call]
    record: dict = {"id": case_id, "call": call, "score_fn": fn, "kwargs": json.loads(json.dumps(kwargs))}
    args = json.loads(json.dumps(kwargs))
    if fn is not None:
        args["score_fn"] = SCORE_FNS[fn]
    try:
        result = helper(**args)
    except Exception as error:  # noqa: BLE001 - the exception type is the reference
        record["raises"] = type(error).__name__
        return record
    record["result"] = args["metrics"] if call == "add_avg_sample_std_dev" else result
    return record


def _environment_cases(rng: random.Random) -> List[dict]:
    """Each environment's compute_metrics calls, then its get_key_metrics calls on the result."""
    cases = []
    mcqa = _tasks(rng, 30, (4, 4), _mcqa_row)
    cases.append(_call("mcqa", "compute_pass_majority_metrics", "reward_accuracy", {"tasks": mcqa, "answer_key": "extracted_answer"}))
    am = dict(cases[-1]["result"][0], **{"mean/reward": 0.25})
    for pattern, names in (("pass@1[avg-of-{k}]", ["accuracy", "no_answer"]), ("pass@{k}", ["no_answer"]), ("majority@{k}", ["accuracy"])):
        cases.append(_call(f"mcqa_key_{pattern}", "highest_k_metrics", None, {"agent_metrics": am, "pattern": pattern, "score_names": names}))
    graph = _tasks(rng, 25, (1, 6), _graphwalks_row)
    cases.append(_call("graphwalks", "compute_pass_majority_metrics", "reward_accuracy", {"tasks": graph}))
    cases.append(_call("graphwalks_subset", "compute_subset_metrics", "reward_accuracy", {"tasks": graph, "subset_key": "problem_type"}))
    am = dict(cases[-2]["result"][0], **cases[-1]["result"])
    for pattern in ("pass@1[avg-of-{k}]", "pass@{k}"):
        cases.append(_call(f"graphwalks_key_{pattern}", "highest_k_metrics", None, {"agent_metrics": am, "pattern": pattern}))
    code = _tasks(rng, 24, (3, 5), _code_row)
    cases.append(_call("code_gen", "compute_pass_majority_metrics", "code_gen", {"tasks": code, "answer_key": "extracted_model_code"}))
    metrics, all_scores, names, max_k = cases[-1]["result"]
    cases.append(_call("code_gen_std", "add_avg_sample_std_dev", None, {"metrics": metrics, "all_score_dicts": all_scores, "score_names": names, "max_k": max_k}))
    cases.append(_call("code_gen_subset", "compute_subset_metrics", "code_gen", {"tasks": code, "subset_key": "difficulty", "answer_key": "extracted_model_code"}))
    am = dict(cases[-2]["result"], **cases[-1]["result"])
    for pattern in ("pass@1[avg-of-{k}]", "pass@{k}", "majority@{k}", "easy/pass@1[avg-of-{k}]", "hard/pass@1[avg-of-{k}]"):
        cases.append(_call(f"code_gen_key_{pattern}", "highest_k_metrics", None, {"agent_metrics": am, "pattern": pattern, "score_names": ["accuracy"]}))
    math = _tasks(rng, 20, (2, 6), _math_row)
    cases.append(_call("math_with_judge", "compute_pass_majority_metrics", "math_with_judge", {"tasks": math, "answer_key": "extracted_answer"}))
    imo = _tasks(rng, 16, (4, 4), _imo_row)
    cases.append(_call("imo_proofbench", "compute_pass_majority_metrics", "imo_proofbench", {"tasks": imo, "answer_key": "extracted_answer"}))
    am = dict(cases[-1]["result"][0])
    for field in ("category", "level"):
        cases.append(_call(f"imo_subset_{field}", "compute_subset_metrics", "imo_proofbench", {"tasks": imo, "subset_key": field, "answer_key": "extracted_answer"}))
        am.update(cases[-1]["result"])
    for pattern, exclude in (("pass@1[avg-of-{k}]", None), ("pass@{k}", ["no_answer"]), ("majority@{k}", ["no_answer"])):
        cases.append(_call(f"imo_key_{pattern}", "highest_k_metrics", None, {"agent_metrics": am, "pattern": pattern, "exclude_names": exclude}))
    return cases


def _random_cases(rng: random.Random) -> List[dict]:
    """Larger seeded inputs: many tasks, ragged k, mixed binary and continuous scores."""
    cases = []
    for i in range(4):
        def row(r: random.Random) -> dict:
            return {
                "scores": {"bin": r.choice([0, 1, True, False, 0.0, 1.0]), "cont": r.choice([0.0, 1.0, r.random()])},
                "answer": r.choice(["p", "q", "r", None, 3]),
                "group": r.choice(["g1", "g2", 7, 0]),
            }
        tasks = _tasks(rng, rng.randint(30, 60), (1, 12) if i % 2 else (8, 8), row)
        cases.append(_call(f"random_{i}", "compute_pass_majority_metrics", "scores", {"tasks": tasks, "answer_key": "answer"}))
        metrics, all_scores, names, max_k = cases[-1]["result"]
        cases.append(_call(f"random_{i}_std", "add_avg_sample_std_dev", None, {"metrics": {}, "all_score_dicts": all_scores, "score_names": names, "max_k": max_k + 2}))
        cases.append(_call(f"random_{i}_subset", "compute_subset_metrics", "scores", {"tasks": tasks, "subset_key": "group", "answer_key": "answer"}))
    return cases


def _edge_cases() -> List[dict]:
    cases = []
    for name, tasks in _edge_rows().items():
        for answer_key in (None, "answer"):
            cases.append(_call(f"edge_{name}_{answer_key}", "compute_pass_majority_metrics", "scores", {"tasks": tasks, "answer_key": answer_key}))
        result = cases[-1].get("result")
        if result:
            cases.append(_call(f"edge_{name}_std", "add_avg_sample_std_dev", None, {"metrics": {}, "all_score_dicts": result[1], "score_names": result[2], "max_k": result[3]}))
    cases.append(_call("edge_empty", "compute_pass_majority_metrics", None, {"tasks": []}))
    cases.append(_call("edge_empty_subset", "compute_subset_metrics", None, {"tasks": [], "subset_key": "x"}))
    cases.append(_call("edge_none_reward", "compute_pass_majority_metrics", None, {"tasks": [[{"reward": None}]]}))
    cases.append(_call("edge_unhashable_answer", "compute_pass_majority_metrics", None, {"tasks": [[{"reward": 1.0, "a": ["x"]}]], "answer_key": "a"}))
    cases.append(_call("edge_std_k1", "add_avg_sample_std_dev", None, {"metrics": {"x": 1.0}, "all_score_dicts": [[{"a": 1.0}, {"a": 0.0}]], "score_names": ["a"], "max_k": 1}))
    cases.append(_call("edge_std_unknown_name", "add_avg_sample_std_dev", None, {"metrics": {}, "all_score_dicts": [[{"a": 1.0}, {"a": 0.0}]], "score_names": ["a", "zz", "a"], "max_k": 3}))
    # Found by scripts/fuzz_nemo_reward_profile.py: NeMo Gym reads (and fails on) only the
    # values it sums: a None / text score in a task with one value or past max_k is never read.
    unread = [[{"a": None}], [{"a": 1.0}, {"a": 0.0}, {"a": "x"}], [{"a": 0.5, "b": "y"}, {"a": 0.25}]]
    for i, max_k in enumerate((2, 3)):
        cases.append(_call(f"edge_std_unread_non_numbers_{i}", "add_avg_sample_std_dev", None, {"metrics": {}, "all_score_dicts": unread, "score_names": ["a"], "max_k": max_k}))
    # Sums across tasks cancelling to far below their terms: CPython's compensated sum, not the
    # correctly rounded one (0.1015625 for 1e30, 0.1, -3e15, -1e30, 3e15; fsum says 0.1).
    ill = [[s_] for s_ in ({"a": 1e30}, {"a": 0.1}, {"a": -3e15}, {"a": -1e30}, {"a": 3e15})]
    cases.append(_call("edge_ill_conditioned_across_tasks", "compute_pass_majority_metrics", "scores",
                       {"tasks": [[{"scores": r[0], "answer": "A"}] for r in ill], "answer_key": "answer"}))  # fmt: skip
    # NaN scores vote in majority@k as Python's Counter counts them: one object with itself only.
    nan_votes = [[{"scores": {"a": NAN}, "answer": "A"}] * 2 + [{"scores": {"a": 1.0}, "answer": "B"}] * 2]
    for fn in ("scores", "scores_fresh_nan"):
        cases.append(_call(f"edge_nan_votes_{fn}", "compute_pass_majority_metrics", fn, {"tasks": nan_votes, "answer_key": "answer"}))
    am = {
        "pass@2/accuracy": 1.0, "pass@10/accuracy": 2.0, "pass@10/no_answer": 3.0, "pass@9/accuracy": 4.0,
        "pass@10/foo_std_dev_across_runs": 5.0, "pass@1[avg-of-10]/accuracy/std_err_across_runs": 6.0,
        "pass@1[avg-of-3]/accuracy": 7.0, "pass@1[avg-of-3]/a/b": 8.0, "easy/pass@4/accuracy": 9.0, "mean/reward": 10.0,
        "majority@x/accuracy": 11.0, "pass@10/": 12.0, "pass@1/accuracy": 13.0,
    }
    for i, (pattern, names, exclude) in enumerate([
        ("pass@{k}", None, None), ("pass@{k}", ["accuracy"], None), ("pass@{k}", [], None), ("pass@{k}", None, ["accuracy"]),
        ("pass@{k}", ["accuracy", "no_answer"], ["no_answer"]), ("pass@1[avg-of-{k}]", None, None), ("majority@{k}", None, None),
        ("easy/pass@{k}", None, None), ("mean/reward", None, None), ("pass@1", None, None), ("nothing@{k}", None, None),
    ]):
        cases.append(_call(f"highest_k_{i}", "highest_k_metrics", None, {"agent_metrics": am, "pattern": pattern, "score_names": names, "exclude_names": exclude}))
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the file there; write nothing")
    args = parser.parse_args()
    rng = random.Random(20260526)
    cases = _environment_cases(rng) + _random_cases(rng) + _edge_cases()
    text = "[\n" + ",\n".join(json.dumps(case) for case in cases) + "\n]\n"
    if args.check:
        same = OUT.read_text() == text
        print("identical" if same else f"{OUT} differs")
        return 0 if same else 1
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {len(cases)} cases to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
