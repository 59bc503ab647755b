"""Differential test of gym_metrics.nemo_gym.reward_profile against NeMo Gym 0.7.0's
`nemo_gym.reward_profile` on random inputs. Each seed makes one call: one of the four helpers
(`compute_pass_majority_metrics`, `add_avg_sample_std_dev`, `compute_subset_metrics`,
`highest_k_metrics`) on made-up score dicts, or an environment's pattern (the mcqa, code_gen,
math_with_judge, imo_proofbench score functions of scripts/nemo_reward_profile_scores.py, and a
get_key_metrics' highest_k_metrics on their merged metrics). The inputs mix what the recorded
cases hold one at a time: many or no tasks, ragged and empty rollout lists, score names missing
from some rollouts, scores as bools, ints, floats, NaN (one object, as JSON gives, or each new),
+/-inf, -0.0, negative, large, null or text, answers of every JSON type (null, unhashable lists,
1 / 1.0 / true / "1"), subset values falsy or not, highest_k patterns and filters.

NeMo Gym's answers come from one subprocess for the batch (`_call` of
scripts/make_nemo_reward_profile_reference.py: the inputs go through JSON as the recorded cases
do); ours are compared as tests/nemo_gym/test_reward_profile.py compares them (`assert_same`:
key order, floats to relative 1e-12; when it raises, the exception's type name). A call where
NeMo Gym raises OverflowError (its `(x - mean) ** 2` on scores ~1e154 apart) is counted apart.

    .venv/bin/python scripts/fuzz_nemo_reward_profile.py --seeds 0:2000 --nemo-python /tmp/ngvenv/bin/python \
        [--keep DIR]   # DIR gets each differing case (NeMo Gym's record) and our answer beside it

Exit 0 when every call gives NeMo Gym's answer here (or raises its exception); 1 when one differs.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "nemo_gym"))
sys.path.insert(0, str(ROOT / "scripts"))
import test_reward_profile as reference_test  # noqa: E402  (its comparison and helpers, not copies)
from nemo_reward_profile_scores import SCORE_FNS  # noqa: E402

NAN = float("nan")
NAMES = ["accuracy", "a", "b", "no_answer", "f1", "Ünï", "x/y", "judge_std_dev_across_runs"]
NEMO_SIDE = """
import json, sys
sys.path.insert(0, sys.argv[1])
from make_nemo_reward_profile_reference import _call
cases = json.loads(open(sys.argv[2]).read())
records = [_call(str(c["id"]), c["call"], c["score_fn"], c["kwargs"]) for c in cases]
open(sys.argv[3], "w").write(json.dumps(records))
"""


def _score(rng: random.Random, style: str) -> Any:
    """One score of a name scored in `style`; now and then a value of another kind. Never an
    int beside +/-1e16: Python's `sum` adds an int to a float total without compensation, and
    ours does not mirror that (int 1 between 1e16 and -1e16 is lost there, kept here)."""
    if rng.random() < 0.03:
        odd: List[Any] = [NAN, float("inf"), -float("inf"), -0.0, 1e300, 2.0**40, None, "1.0"]
        return rng.choice(odd if style == "large" else odd + [True, 2, -1, 2**40])
    if style == "binary":
        return rng.choice([0, 1, 0.0, 1.0, True, False])
    if style == "bool":
        return rng.random() < 0.5
    if style == "int":
        return rng.randint(-3, 9)
    if style == "large":  # sums cancelling far below their terms
        return rng.choice([1e16, -1e16, 1.0, 3e15, -3e15, 1e30, -1e30, 0.1, rng.uniform(-1e12, 1e12)])
    if style == "nan":
        return rng.choice([NAN, NAN, 0.0, 1.0, 0.5])
    if style == "constant":
        return 0.1
    return rng.choice([0.0, 1.0, rng.random(), round(rng.random(), 2), 2 / 3])


def _answer(rng: random.Random, unhashable: bool) -> Any:
    options: List[Any] = ["A", "B", "A", 1, 1.0, True, 0, False, "1", "", None, None, NAN, "ß"]
    if unhashable:
        options += [["x"], {"k": 1}]
    return rng.choice(options)


def _score_tasks(rng: random.Random) -> List[List[Dict[str, Any]]]:
    """Rollouts carrying their score dict (score fn "scores"), an answer and a group."""
    names = rng.sample(NAMES, rng.randint(1, 3))
    styles = {name: rng.choice(["binary", "binary", "bool", "int", "continuous", "continuous", "large", "constant", "nan"]) for name in names}
    unhashable = rng.random() < 0.05
    width = rng.choice([1, 2, 3, 4, 8, 12])
    ragged = rng.random() < 0.5
    tasks = []
    for _ in range(rng.choice([0, 1, 2, 5, 10, 30, 60]) if rng.random() < 0.95 else 0):
        count = rng.randint(0, width) if ragged else width
        rollouts = []
        for _ in range(count):
            scores = {name: _score(rng, styles[name]) for name in names if rng.random() > 0.1}
            rollout = {"scores": scores, "answer": _answer(rng, unhashable), "group": rng.choice(["g1", "g2", 7, 0, "", None, True, 1.0])}
            if rng.random() < 0.1:
                del rollout["answer"]
            rollouts.append(rollout)
        tasks.append(rollouts)
    return tasks


def _env_rows(rng: random.Random, fn: str) -> List[List[Dict[str, Any]]]:
    """Rollouts as an environment's score function reads them (fields sometimes missing)."""
    def row() -> Dict[str, Any]:
        r: Dict[str, Any] = {
            "reward": rng.choice([0.0, 1.0, 0.5, True, 0, 1, rng.random()]),
            "extracted_answer": rng.choice(["A", "B", "42", None, 7]),
            "difficulty": rng.choice(["easy", "hard", None, ""]),
        }
        if fn == "math_with_judge":
            if rng.random() < 0.8:
                r["library_reward"] = rng.choice([0.0, 1.0, True])
            r["judge_evaluations"] = rng.choice([None, [{"verdict": "A=B"}], []])
        if fn == "imo_proofbench":
            r.update(symbolic_correct=rng.choice([0.0, 1.0, None, 0.5]), judge_correct=rng.choice([0.0, 1.0]),
                     judge_points=rng.choice([0, 1, 7, None]), category=rng.choice(["Algebra", "Geometry"]))  # fmt: skip
        return r
    width = rng.randint(1, 8)
    return [[row() for _ in range(rng.randint(1, width) if rng.random() < 0.5 else width)] for _ in range(rng.randint(1, 40))]


def _agent_metrics(rng: random.Random) -> Dict[str, Any]:
    metrics: Dict[str, Any] = {}
    for _ in range(rng.randint(0, 25)):
        prefix = rng.choice(["", "", "easy/", "7/", "Algebra/"])
        mode = rng.choice(["pass@{k}", "pass@1[avg-of-{k}]", "majority@{k}"])
        k = rng.choice([1, 2, 4, 10, 16, 32])
        name = rng.choice(NAMES + ["accuracy/std_err_across_runs", "accuracy/avg_sample_std_dev", "a/b", ""])
        metrics[f"{prefix}{mode.format(k=k)}/{name}"] = rng.choice([rng.random() * 100, NAN, 0, None])
    if rng.random() < 0.5:
        metrics["mean/reward"] = rng.random()
    keys = list(metrics)
    rng.shuffle(keys)
    return {key: metrics[key] for key in keys}


def _environment_metrics(rng: random.Random) -> Dict[str, Any]:
    """An environment's agent metrics as its get_key_metrics sees them: compute_pass_majority_metrics
    and compute_subset_metrics merged (ours, which the other calls check against NeMo Gym's)."""
    fn = rng.choice(["reward_accuracy", "code_gen", "math_with_judge", "imo_proofbench"])
    tasks, field = _env_rows(rng, fn), "category" if fn == "imo_proofbench" else "difficulty"
    metrics = dict(reference_test.compute_pass_majority_metrics(tasks, SCORE_FNS[fn], "extracted_answer")[0], **{"mean/reward": 0.5})
    metrics.update(reference_test.compute_subset_metrics(tasks, field, SCORE_FNS[fn], "extracted_answer"))
    return json.loads(json.dumps(metrics))


def case_for(seed: int) -> Dict[str, Any]:
    """Seed `seed`'s call: {id, call, score_fn, kwargs} (deterministic)."""
    rng = random.Random(seed)
    kind = rng.choice(["pass", "pass", "pass", "std", "subset", "subset", "highest", "env", "env"])
    answer_key: Optional[str] = rng.choice([None, "answer"])
    scores_fn = rng.choice(["scores", "scores", "scores_fresh_nan"])  # NaNs one object (JSON's) or each new
    if kind == "pass":
        return {"id": seed, "call": "compute_pass_majority_metrics", "score_fn": scores_fn, "kwargs": {"tasks": _score_tasks(rng), "answer_key": answer_key}}
    if kind == "subset":
        key = rng.choice(["group", "group", "answer", "missing"])
        return {"id": seed, "call": "compute_subset_metrics", "score_fn": scores_fn, "kwargs": {"tasks": _score_tasks(rng), "subset_key": key, "answer_key": answer_key}}
    if kind == "std":
        dicts = [[r["scores"] for r in task] for task in _score_tasks(rng)]
        present = sorted({name for task in dicts for scores in task for name in scores})
        names = present if rng.random() < 0.6 else rng.sample(NAMES, rng.randint(0, 3)) + present[:1]
        max_k = max((len(t) for t in dicts), default=0) + rng.choice([0, 0, 0, 1, 3, -1])
        metrics = {"pass@1/accuracy": 50.0} if rng.random() < 0.3 else {}
        return {"id": seed, "call": "add_avg_sample_std_dev", "score_fn": None, "kwargs": {"metrics": metrics, "all_score_dicts": dicts, "score_names": names, "max_k": max_k}}
    if kind == "highest":
        pattern = rng.choice(["pass@{k}", "pass@1[avg-of-{k}]", "majority@{k}", "easy/pass@{k}", "7/majority@{k}", "Algebra/pass@{k}", "pass@1", "nothing@{k}"])
        names = rng.choice([None, None, ["accuracy"], ["a", "b"], [], ["no_answer"], ["any_correct", "judge_accuracy"]])
        exclude = rng.choice([None, None, ["no_answer"], ["accuracy", "a"]])
        metrics = _agent_metrics(rng) if rng.random() < 0.6 else _environment_metrics(rng)
        return {"id": seed, "call": "highest_k_metrics", "score_fn": None,
                "kwargs": {"agent_metrics": metrics, "pattern": pattern, "score_names": names, "exclude_names": exclude}}  # fmt: skip
    fn = rng.choice(["reward_accuracy", "code_gen", "math_with_judge", "imo_proofbench", None])
    answer = rng.choice([None, "extracted_answer"])
    if rng.random() < 0.3:
        field = "category" if fn == "imo_proofbench" else "difficulty"
        return {"id": seed, "call": "compute_subset_metrics", "score_fn": fn, "kwargs": {"tasks": _env_rows(rng, str(fn)), "subset_key": field, "answer_key": answer}}
    return {"id": seed, "call": "compute_pass_majority_metrics", "score_fn": fn, "kwargs": {"tasks": _env_rows(rng, str(fn)), "answer_key": answer}}


def ours(case: Dict[str, Any]) -> Dict[str, Any]:
    """Our answer to `case` as a record: {result} or {raises}."""
    kwargs = json.loads(json.dumps(case["kwargs"]))  # as the recorded cases reach the test
    if case["score_fn"] is not None:
        kwargs["score_fn"] = SCORE_FNS[case["score_fn"]]
    try:
        result = reference_test.HELPERS[case["call"]](**kwargs)
    except Exception as error:  # noqa: BLE001 - the exception type is compared
        return {"raises": type(error).__name__, "message": str(error)[:200]}
    return {"result": kwargs["metrics"] if case["call"] == "add_avg_sample_std_dev" else result}


def mismatch(record: Dict[str, Any], mine: Dict[str, Any]) -> Optional[str]:
    """Why our answer is not NeMo Gym's (None when it is)."""
    if "raises" in record or "raises" in mine:
        if record.get("raises") == mine.get("raises"):
            return None
        return f"NeMo Gym {record.get('raises', 'returns')}, ours {mine.get('raises', 'returns')} {mine.get('message', '')}"
    try:
        reference_test.assert_same(mine["result"], record["result"], "")
    except AssertionError as error:
        return str(error).splitlines()[0][:300]
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:500", help="FIRST:STOP (default 0:500)")
    parser.add_argument("--nemo-python", required=True, help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing case and our answer here")
    args = parser.parse_args(argv)
    first, stop = (int(x) for x in args.seeds.split(":"))
    cases = [case_for(seed) for seed in range(first, stop)]
    with tempfile.TemporaryDirectory() as tmp:
        inputs, outputs = Path(tmp) / "cases.json", Path(tmp) / "records.json"
        inputs.write_text(json.dumps(cases), encoding="utf-8")
        subprocess.run([args.nemo_python, "-c", NEMO_SIDE, str(ROOT / "scripts"), str(inputs), str(outputs)], check=True)
        records = json.loads(outputs.read_text(encoding="utf-8"))
    differing, overflowed, refused, calls = 0, 0, Counter(), Counter()
    for case, record in zip(cases, records):
        calls[case["call"]] += 1
        if "raises" in record:
            refused[record["raises"]] += 1
        mine = ours(case)
        why = mismatch(record, mine)
        if why is None:
            continue
        # NeMo Gym's `(x - mean) ** 2` in Python floats raises on scores past ~1e154 apart: its
        # crash, not copied (ours gives inf), so counted apart from the differences.
        crash = record.get("raises") == "OverflowError"
        overflowed += crash
        differing += not crash
        print(f"seed {case['id']} ({case['call']}, score_fn {case['score_fn']}){' [NeMo Gym overflow]' if crash else ''}: {why}")
        if args.keep:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"seed_{case['id']}.json").write_text(json.dumps({"nemo_gym": record, "ours": mine}, default=repr) + "\n")
    for reason, count in refused.most_common():
        print(f"NeMo Gym raised {reason} on {count} calls")
    print(f"{len(cases)} calls ({dict(calls)}): {len(cases) - differing - overflowed} the same as NeMo Gym's, "
          f"{differing} differing, {overflowed} where NeMo Gym overflowed and ours did not or raised otherwise; "
          f"NeMo Gym raised on {sum(refused.values())}")  # fmt: skip
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
