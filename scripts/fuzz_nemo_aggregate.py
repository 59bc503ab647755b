"""Differential test of aggregation against NeMo Gym 0.7.0 on random rollouts files: each seed
makes one file mixing what the hand-written cases (scripts/make_conformance_cases.py) hold one at
a time (agents interleaved, sparse task and rollout indices, fields of every JSON type with
missing, null and NaN values, masks given as bools or numbers, rewards as bools, ints, text or
null, `response.usage` beside and against top-level keys, odd field names, integers past
int64, `ng_perf` blocks with keys missing or mistyped), then NeMo Gym's
metrics (scripts/make_nemo_reference.py, in a nemo-gym venv) and ours (`aggregate_file`, through
the columnar reader and forced through its per-line path) are compared as the conformance test
compares them (tests/aggregate/test_nemo_conformance.py: every number to 1e-9, key sets, order,
rollout_infos' JSON types). A file NeMo Gym itself fails on has no reference and is counted apart.

    .venv/bin/python scripts/fuzz_nemo_aggregate.py --seeds 0:300 --nemo-python /tmp/ngvenv/bin/python \
        [--keep DIR]   # DIR gets each differing file with NeMo Gym's metrics and ours beside it

Exit 0 when every file NeMo Gym scores gives the same metrics here; 1 when one differs.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "aggregate"))
import test_nemo_conformance as conformance  # noqa: E402  (its comparison, not a copy of it)

from gym_metrics.aggregate import aggregate_file  # noqa: E402
from gym_metrics.rollouts import _reader  # noqa: E402

NAN = float("nan")
FIELD_NAMES = ["score", "tokens", "passed", "len", "x/y", "a.b", "latency_std", "judge_count", "mean", "num_repeats", "Ünï", "sum"]
KINDS = ["float", "int", "bool", "int_float", "numeric_text", "text", "list", "object", "mostly_null", "big_int"]
USAGE_KEYS = ["input_tokens", "output_tokens", "total_tokens"]


def _value(rng: random.Random, kind: str) -> Any:
    """One value of a field of `kind`; sometimes null or NaN, as real rows have them."""
    roll = rng.random()
    if roll < 0.06:
        return None
    if roll < 0.10 and kind in ("float", "int_float"):
        return NAN
    if kind == "float":
        return rng.choice([rng.random(), rng.uniform(-1e6, 1e6), rng.choice([0.0, 1.0, 1e-300, 1e9, -0.0])])
    if kind == "int":
        return rng.choice([rng.randint(0, 3), rng.randint(-10**6, 10**6)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "int_float":
        return rng.choice([rng.randint(0, 9), rng.random() * 9, float(rng.randint(0, 9))])
    if kind == "numeric_text":
        return rng.choice(["1.0", "0", "2.5", "x"])
    if kind == "text":
        return rng.choice(["a", "", "b c"])
    if kind == "list":
        return [rng.randint(0, 3)] * rng.randint(0, 2)
    if kind == "object":
        return {"k": rng.randint(0, 2)}
    if kind == "big_int":  # past float precision, one sign: huge values that cancel leave any float64 mean
        # inexact, NeMo Gym's (pandas) and ours differently; none 2**63 apart (docs/metrics.md#aggregate-differences)
        return rng.choice([2**53 + 1, 2**62, rng.randint(0, 9), rng.randint(0, 9)])
    return None if rng.random() < 0.8 else rng.random()  # mostly_null


def _reward(rng: random.Random, style: str) -> Any:
    if style == "bool":
        return rng.random() < 0.5
    if style == "int":
        return rng.randint(0, 1)
    if style == "mixed":
        return rng.choice([0, 1, 0.5, True, False, None, NAN, "1.0", rng.random()])
    return rng.choice([0.0, 1.0, rng.random()])


def _perf(rng: random.Random) -> dict[str, Any]:
    """An `ng_perf` block (NeMo Gym's collection with observability on), keys sometimes missing
    or of another type."""
    block: dict[str, Any] = {
        "num_turns": rng.randint(0, 5), "num_tool_calls": rng.randint(0, 3), "token_observability_coverage": rng.choice([0.0, 0.5, 1.0]),
        "prompt_tokens": rng.randint(0, 900), "cached_prompt_tokens": rng.randint(0, 50), "completion_tokens": rng.randint(0, 300),
        "reasoning_tokens": rng.randint(0, 100), "total_latency_ms": rng.uniform(1, 5000),
    }  # fmt: skip
    for key in rng.sample(sorted(block), rng.randint(0, 2)):
        block[key] = rng.choice([None, True, "7", NAN]) if rng.random() < 0.5 else block.pop(key)
    return block


def rows_for(seed: int) -> list[dict[str, Any]]:
    """The rows of seed `seed`'s file (deterministic)."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    agents = rng.sample(["alpha", "beta", "agent/two", "Zed"], rng.randint(1, 3))
    for agent in agents:
        fields = {name: rng.choice(KINDS) for name in rng.sample(FIELD_NAMES, rng.randint(0, 5))}
        reward_style = rng.choice(["float", "float", "bool", "int", "mixed"])
        usage = rng.random() < 0.4
        clash = rng.sample(USAGE_KEYS, rng.randint(0, 2)) if usage else []
        masks = rng.random() < 0.3
        perf = rng.random() < 0.3
        for task in rng.sample(range(60), rng.randint(1, 8)):
            for rollout in sorted(rng.sample(range(7), rng.randint(1, 5))):
                row: dict[str, Any] = {"agent_ref": {"name": agent}, "_ng_task_index": task, "_ng_rollout_index": rollout}
                if rng.random() > 0.03:
                    row["reward"] = _reward(rng, reward_style)
                for name, kind in fields.items():
                    if rng.random() > 0.12:  # else absent from this row
                        row[name] = _value(rng, kind)
                for name in clash:
                    row[name] = rng.randint(0, 50)
                if usage:
                    shape = rng.random()
                    if shape < 0.1:
                        row["response"] = {}
                    elif shape < 0.2:
                        row["response"] = {"usage": None}
                    elif shape < 0.9:
                        row["response"] = {"usage": {k: (None if rng.random() < 0.05 else rng.randint(0, 500)) for k in USAGE_KEYS}}
                        if rng.random() < 0.3:
                            row["response"]["usage"]["output_tokens_details"] = {"reasoning_tokens": rng.randint(0, 9)}
                    if shape > 0.8:
                        row.setdefault("response", {})["incomplete_details"] = {"reason": "max_output_tokens"}
                if perf and rng.random() < 0.8:
                    row["ng_perf"] = _perf(rng)
                if masks and rng.random() < 0.25:
                    row["mask_sample"] = rng.choice([True, False, 1, 0])
                rows.append(row)
    order = rng.choice(["as made", "shuffled", "by task"])
    if order == "shuffled":
        rng.shuffle(rows)
    elif order == "by task":
        rows.sort(key=lambda r: (r["_ng_task_index"], r["_ng_rollout_index"]))
    return rows


def ours(case: Path, work: Path, per_line: bool) -> Any:
    """Our metrics of `case` (copied into `work`), through the columnar or the per-line reader."""
    work.mkdir(exist_ok=True)
    src = work / case.name
    shutil.copyfile(case, src)
    fast = _reader._read_fast
    if per_line:
        _reader._read_fast = lambda *args: None  # type: ignore[assignment]
    try:
        out, _, _ = aggregate_file(src)
    finally:
        _reader._read_fast = fast  # type: ignore[assignment]
    return conformance.load_json(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0:100", help="FIRST:STOP (default 0:100)")
    parser.add_argument("--nemo-python", required=True, help="a python with nemo-gym 0.7.0 installed")
    parser.add_argument("--keep", type=Path, help="write each differing file and both metrics here")
    args = parser.parse_args(argv)
    first, stop = (int(x) for x in args.seeds.split(":"))
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for seed in range(first, stop):
            case = Path(tmp) / f"fuzz_{seed}.jsonl"
            case.write_text("".join(json.dumps(r) + "\n" for r in rows_for(seed)), encoding="utf-8")
            cases.append(case)
        made = subprocess.run([args.nemo_python, str(ROOT / "scripts" / "make_nemo_reference.py"), *map(str, cases)],
                              capture_output=True, text=True, check=False)  # fmt: skip
        refused = [line for line in made.stdout.splitlines() if line.startswith("NEMO-GYM FAILED")]
        same = differing = 0  # files
        for case in cases:
            expected_path = conformance.expected_path(case)
            if not expected_path.exists():
                continue
            expected = conformance.load_json(expected_path)
            found = False
            for reader in ("columnar", "per-line"):
                actual = ours(case, Path(tmp) / reader, reader == "per-line")
                mismatch = conformance.compare_files(expected, actual)
                if mismatch is None:
                    continue
                found = True
                print(f"{case.name} ({reader} reader): {mismatch}")
                if args.keep:
                    args.keep.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(case, args.keep / case.name)
                    shutil.copyfile(expected_path, args.keep / expected_path.name)
                    (args.keep / f"{case.stem}_ours_{reader}.json").write_text(json.dumps(actual, indent=2) + "\n")
            same += not found
            differing += found
        reasons = Counter(line.split(": ", 1)[1] for line in refused)
        for reason, count in reasons.most_common():
            print(f"NeMo Gym failed on {count} files: {reason}")
        print(f"{stop - first} files: {same} the same as NeMo Gym's (both readers), {differing} differing, "
              f"{len(refused)} NeMo Gym failed on (no reference)")  # fmt: skip
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
