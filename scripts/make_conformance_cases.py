"""Generate the extra NeMo Gym conformance rollout files (tests/data/nemo_gym_extra/*.jsonl).

Deterministic (seeded, stdlib only); run with the project venv from the repository root:

    .venv/bin/python scripts/make_conformance_cases.py            # writes tests/data/nemo_gym_extra/
    .venv/bin/python scripts/make_conformance_cases.py --out DIR

Then produce nemo-gym 0.7.0's expected outputs beside them (needs a nemo-gym interpreter; see
scripts/make_nemo_reference.py):

    /tmp/ngvenv/bin/python scripts/make_nemo_reference.py tests/data/nemo_gym_extra/*.jsonl

Rows are written with Python's `json`, so a NaN value is the `NaN` literal. No case holds
+/-inf: NeMo Gym fails on it, gym-metrics deliberately does not
(docs/metrics.md#aggregate-differences).
No case uses the `task_index` / `rollout_index` aliases: nemo-gym reads only `_ng_task_index`
(default 0) and would treat `task_index` as a numeric field, so the alias has no NeMo Gym
reference; tests/aggregate/test_nemo_conformance.py checks the alias against the `_ng_` spelling instead.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

NAN = float("nan")
Row = dict[str, Any]
CASES: dict[str, Callable[[], list[Row]]] = {}


def case(fn: Callable[[], list[Row]]) -> Callable[[], list[Row]]:
    CASES[fn.__name__] = fn
    return fn


def row(agent: str, task: int, rollout: int, **fields: Any) -> Row:
    return {"agent_ref": {"name": agent}, "_ng_task_index": task, "_ng_rollout_index": rollout, **fields}


def grid(tasks: int, repeats: int) -> Iterator[tuple[int, int]]:
    for t in range(tasks):
        for r in range(repeats):
            yield t, r


@case
def nan_and_missing() -> list[Row]:
    """NaN literals and absent keys, in reward and in other fields."""
    rng = random.Random(101)
    rows = []
    for t, r in grid(6, 4):
        fields: Row = {"reward": float(rng.random() < 0.5), "score": round(rng.uniform(-2, 2), 6), "len": rng.randint(5, 90)}
        k = (t * 4 + r) % 7
        if k == 1:
            fields["reward"] = NAN
        elif k == 2:
            del fields["score"]
        elif k == 3:
            fields["score"] = NAN
        elif k == 5:
            del fields["reward"]
        rows.append(row("nan_agent", t, r, **fields))
    # Task 6: score NaN in every rollout (its score stats are all undefined).
    for r in range(4):
        rows.append(row("nan_agent", 6, r, reward=1.0, score=NAN, len=10 + r))
    # Task 7: a single rollout whose score is NaN (std fill applies to reward/len only).
    rows.append(row("nan_agent", 7, 0, reward=0.0, score=NAN, len=3))
    # Task 8: two rollouts, every field has at most one usable value (all stds undefined).
    rows.append(row("nan_agent", 8, 0, reward=1.0, score=NAN))
    rows.append(row("nan_agent", 8, 1, reward=NAN, score=0.5, len=7))
    return rows


@case
def none_values() -> list[Row]:
    """None (JSON null) in fields other than reward: not numeric, left out."""
    rng = random.Random(102)
    rows = []
    for t, r in grid(5, 3):
        fields: Row = {"reward": float(rng.random() < 0.6), "judge": rng.choice([0.0, 0.25, 0.5, 1.0]), "turns": rng.randint(1, 6)}
        if (t + r) % 4 == 0:
            fields["judge"] = None
        if t == 3:
            fields["turns"] = None  # a task where one field is null throughout
        rows.append(row("none_agent", t, r, **fields))
    return rows


@case
def none_reward() -> list[Row]:
    """`reward: null` in some rows (nemo-gym copies `reward` into rollout_infos whatever it is)."""
    rows = []
    for t, r in grid(3, 3):
        reward = None if (t, r) in {(0, 1), (2, 0)} else float((t + r) % 2)
        rows.append(row("none_reward_agent", t, r, reward=reward, x=t + r / 10))
    return rows


@case
def bools_and_ints() -> list[Row]:
    """bool fields (0/1), int fields, and a field that is int in some rows and float in others."""
    rng = random.Random(103)
    rows = []
    for t, r in grid(5, 4):
        n = rng.randint(0, 9)
        rows.append(
            row(
                "typed_agent",
                t,
                r,
                reward=float(rng.random() < 0.5),
                is_correct=rng.random() < 0.4,
                has_answer=True if t != 2 else rng.random() < 0.5,
                tool_calls=rng.randint(0, 5),
                mixed=n if (t + r) % 2 else n + 0.5,
                big_int=10**12 + rng.randint(0, 1000),
                negative=-rng.randint(1, 50),
            )
        )
    return rows


@case
def bool_reward() -> list[Row]:
    """A reward given as a JSON bool."""
    rows = []
    for t, r in grid(3, 3):
        rows.append(row("bool_reward_agent", t, r, reward=(t * 3 + r) % 3 != 0, score=0.1 * (t + r)))
    return rows


@case
def usage_partial() -> list[Row]:
    """response.usage in some rows; others have a response without usage, usage null, or no response."""
    rng = random.Random(104)
    rows = []
    for t, r in grid(5, 4):
        fields: Row = {"reward": float(rng.random() < 0.5)}
        k = (t * 4 + r) % 5
        inp, out = rng.randint(50, 900), rng.randint(5, 400)
        usage = {
            "input_tokens": inp,
            "output_tokens": out,
            "total_tokens": inp + out,
            "input_tokens_details": {"cached_tokens": rng.randint(0, 40)},
            "output_tokens_details": {"reasoning_tokens": rng.randint(0, 40)},
        }
        if k == 0:
            fields["response"] = {"id": f"r{t}{r}", "output": [], "usage": usage, "incomplete_details": None}
        elif k == 1:
            fields["response"] = {"id": f"r{t}{r}", "output": []}  # no usage
        elif k == 2:
            fields["response"] = {"id": f"r{t}{r}", "output": [], "usage": None}
        elif k == 3:
            pass  # no response at all
        else:
            del usage["output_tokens_details"]
            fields["response"] = {"id": f"r{t}{r}", "usage": usage}
        fields["responses_create_params"] = {"input": [{"role": "user", "content": "q"}]}
        rows.append(row("usage_agent", t, r, **fields))
    # Task 5: an empty usage object, and usage holding a bool and a string.
    rows.append(row("usage_agent", 5, 0, reward=1.0, response={"usage": {}}))
    rows.append(row("usage_agent", 5, 1, reward=0.0, response={"usage": {"input_tokens": 12, "cache_hit": True, "tier": "x"}}))
    rows.append(row("usage_agent", 5, 2, reward=0.0, response={"usage": {"input_tokens": 30, "cache_hit": False, "tier": "y"}}))
    return rows


@case
def usage_clash() -> list[Row]:
    """A usage key that is also a top-level key (usage wins in the stats, as `row | usage`)."""
    rows = []
    for t, r in grid(3, 2):
        usage = {"input_tokens": 100 + t, "output_tokens": 10 * r + 1, "total_tokens": 111 + t + 10 * r}
        rows.append(row("clash_agent", t, r, reward=float(r), total_tokens=7, response={"usage": usage}))
    return rows


@case
def usage_null_clash() -> list[Row]:
    """usage holds null for a key the row also has at top level: `row | usage` makes it absent."""
    rows = []
    for t, r in grid(3, 2):
        usage = {"input_tokens": 100 + t, "total_tokens": None if r == 0 else 200 + t}
        rows.append(row("null_clash_agent", t, r, reward=float(r), total_tokens=7 + t, response={"usage": usage}))
    return rows


@case
def single_rollout_tasks() -> list[Row]:
    """Every task has one rollout (no repeat block); some fields missing or NaN."""
    rng = random.Random(105)
    rows = []
    for t in range(7):
        fields: Row = {"reward": float(rng.random() < 0.5), "x": round(rng.random(), 6), "n": rng.randint(0, 3)}
        if t == 2:
            del fields["x"]
        if t == 4:
            fields["x"] = NAN
        if t == 5:
            fields["n"] = None
        rows.append(row("single_agent", t, 0, **fields))
    return rows


@case
def mixed_single_and_multi() -> list[Row]:
    """Some tasks with one rollout, others with several; rollout index missing for some tasks."""
    rng = random.Random(106)
    plan = {0: [0], 1: [0, 1, 2, 3], 2: [1], 3: [0, 2, 3], 4: [3], 5: [0, 1]}
    rows = []
    for t, rollouts in plan.items():
        for r in rollouts:
            rows.append(row("mix_agent", t, r, reward=float(rng.random() < 0.5), v=round(rng.gauss(0, 1), 6)))
    return rows


@case
def masked_rows() -> list[Row]:
    """mask_sample true on some rows, one task fully masked, a field only masked rows carry."""
    rng = random.Random(107)
    rows = []
    for t, r in grid(6, 4):
        fields: Row = {"reward": float(rng.random() < 0.5), "z": round(rng.random(), 6)}
        masked = t == 2 or (t, r) in {(0, 1), (4, 0), (4, 3), (5, 2)}
        fields["mask_sample"] = masked
        if masked:
            fields["masked_only"] = 1.0  # present only on masked rows: never a field
        rows.append(row("mask_agent", t, r, **fields))
    return rows


@case
def masked_truthy_values() -> list[Row]:
    """mask_sample given as 1 / 0 / absent; masking leaves one repeat index with no measured row."""
    rows = []
    for t, r in grid(4, 3):
        fields: Row = {"reward": float((t + r) % 2), "w": t * 1.5 - r}
        if r == 2:
            fields["mask_sample"] = 1 if t != 3 else "yes"
        elif t == 1:
            fields["mask_sample"] = 0
        elif t == 2:
            fields["mask_sample"] = None
        rows.append(row("truthy_mask_agent", t, r, **fields))
    return rows


@case
def masked_to_one_repeat() -> list[Row]:
    """Masking leaves a single rollout index: no repeat block, though num_repeats counts all."""
    rows = []
    for t, r in grid(3, 3):
        rows.append(row("one_repeat_left", t, r, reward=float(t % 2), mask_sample=r != 0, q=t + 0.25 * r))
    return rows


@case
def unequal_repeats() -> list[Row]:
    """Tasks with different numbers of rollouts, gaps in rollout indices, sparse task indices."""
    rng = random.Random(108)
    plan = {3: [0, 1, 2, 3, 4], 10: [0, 2, 4], 11: [1, 2], 42: [0, 1, 2, 3], 100: [4], 7: [0, 3]}
    rows = []
    for t, rollouts in plan.items():
        for r in rollouts:
            rows.append(
                row("uneven_agent", t, r, reward=float(rng.random() < 0.5), tokens=rng.randint(10, 500), p=round(rng.random(), 5))
            )
    rng.shuffle(rows)
    return rows


@case
def field_in_some_tasks() -> list[Row]:
    """A field present only in some tasks (and once only in one repeat of a task)."""
    rng = random.Random(109)
    rows = []
    for t, r in grid(5, 3):
        fields: Row = {"reward": float(rng.random() < 0.5)}
        if t in (1, 3):
            fields["judge_score"] = round(rng.uniform(0, 10), 4)
        if t == 4 and r == 1:
            fields["rare"] = 3
        rows.append(row("partial_field_agent", t, r, **fields))
    return rows


@case
def one_value_groups() -> list[Row]:
    """Groups where one field has exactly one value and others several (that std is left out)."""
    rows = []
    for t, r in grid(4, 3):
        fields: Row = {"reward": float((t * r) % 2), "a": 1.0 + t + r}
        if r == 0:
            fields["once"] = 2.0 * t  # one value per task
        if t == 3:
            fields["a"] = 5.0  # constant: std 0, not undefined
        rows.append(row("one_value_agent", t, r, **fields))
    return rows


@case
def string_fields() -> list[Row]:
    """String fields, including number-like strings and a field that is a string in some rows."""
    rows = []
    for t, r in grid(3, 3):
        rows.append(
            row(
                "string_agent",
                t,
                r,
                reward=float(r != 1),
                verdict=["ok", "bad", "ok"][r],
                answer=str(t * 10 + r),
                flag="true" if t else "false",
                sometimes=(0.5 * r) if t != 1 else "n/a",
                nested={"score": 9.0, "items": [1, 2]},
                tags=["x", "y"],
            )
        )
    return rows


@case
def multi_agent_three() -> list[Row]:
    """Three agents, rows interleaved, each with its own fields and shape."""
    rng = random.Random(110)
    rows = []
    for t, r in grid(4, 3):
        rows.append(row("charlie", t, r, reward=float(rng.random() < 0.3), c_only=rng.randint(0, 9)))
        rows.append(row("alpha", t, r, reward=float(rng.random() < 0.7), latency=round(rng.uniform(0.1, 3), 4)))
        if r == 0:
            rows.append(row("bravo", t, 0, reward=round(rng.random(), 4), b_flag=rng.random() < 0.5))
    rng.shuffle(rows)
    return rows


@case
def multi_agent_masked_agent() -> list[Row]:
    """Two agents: one with every rollout masked, one with none."""
    rows = []
    for t, r in grid(3, 2):
        rows.append(row("all_masked", t, r, reward=1.0, mask_sample=True))
        rows.append(row("measured", t, r, reward=float((t + r) % 2), s=t - r))
    return rows


@case
def single_row_agent() -> list[Row]:
    """An agent with exactly one rollout (agent-level std 0.0 for fields it has)."""
    return [row("lonely", 4, 2, reward=1.0, x=NAN, y=3)]


@case
def constant_and_extreme() -> list[Row]:
    """Constant values, tiny and huge magnitudes, values near a large offset."""
    rows = []
    for t, r in grid(4, 4):
        rows.append(
            row(
                "extreme_agent",
                t,
                r,
                reward=0.1,
                tiny=1e-300 * (r + 1),
                # Varies inside every task: nemo-gym crashes (its W&B histogram) on a task where a
                # field is constant at a magnitude of about 2**47 (1.4e14) or more: no reference.
                # 1e150, not 1e300: squares must not overflow (std would be inf, which nemo-gym
                # cannot serialise either).
                huge=1e150 * (t + r + 1),
                offset=1e9 + 0.001 * (t * 4 + r),
                third=1 / 3 + r,
            )
        )
    return rows


@case
def odd_field_names() -> list[Row]:
    """Field names that end like nemo-gym's excluded stat suffixes or hold slashes."""
    rows = []
    for t, r in grid(3, 3):
        rows.append(
            row(
                "odd_names_agent",
                t,
                r,
                reward=float((t + r) % 2),
                **{
                    "judge/max": float(t + r),
                    "acc_ci_lower": 0.1 * r,
                    "pass/std_dev_across_runs": 1.0 * t,
                    "score/p25": r - t,
                    "x_across_repeats/y": 2.0 * r,
                    "sample_count": t,
                },
            )
        )
    return rows


@case
def large_random() -> list[Row]:
    """200 tasks x 5 repeats, several fields with ~10% missing (absent, null or NaN), shuffled."""
    rng = random.Random(2024)
    rows = []
    for t, r in grid(200, 5):
        difficulty = rng.random()
        fields: Row = {
            "reward": float(rng.random() > difficulty),
            "partial_credit": round(rng.betavariate(2, 2), 6),
            "num_steps": rng.randint(1, 40),
            "is_correct": rng.random() > difficulty,
            "latency_s": round(rng.lognormvariate(0, 1), 5),
            "cost": rng.choice([0.001, 0.002, 0.01]) * rng.randint(1, 20),
            "verdict": rng.choice(["pass", "fail", "timeout"]),
        }
        for key in ("partial_credit", "num_steps", "latency_s", "cost", "is_correct"):
            u = rng.random()
            if u < 0.04:
                del fields[key]
            elif u < 0.07:
                fields[key] = None
            elif u < 0.10:
                fields[key] = NAN
        if rng.random() < 0.5:
            inp, out = rng.randint(100, 4000), rng.randint(10, 2000)
            fields["response"] = {"usage": {"input_tokens": inp, "output_tokens": out, "total_tokens": inp + out}}
        if rng.random() < 0.03:
            fields["mask_sample"] = True
        rows.append(row("big_agent", t, r, **fields))
    # Drop a few rollouts so some repeats miss tasks.
    drop = set(rng.sample(range(len(rows)), 25))
    rows = [x for i, x in enumerate(rows) if i not in drop]
    rng.shuffle(rows)
    return rows


@case
def reward_types() -> list[Row]:
    """`reward` of every JSON type: nemo-gym's rollout_infos copy it as the row holds it, its
    stats count only numbers (a string, null, object or list is left out; a bool counts 0/1)."""
    absent = object()
    values: list[Any] = [1.0, "1.0", None, NAN, 1, 0.5, True, False, {"score": 1}, [1, 0], absent, 0, "pass", 0.0, 1]
    rows = []
    for t, r in grid(5, 3):
        i = t * 3 + r
        fields: Row = {"score": round(0.25 * (i % 5), 2), "steps": i % 4}
        if values[i] is not absent:
            fields["reward"] = values[i]
        rows.append(row("reward_types_agent", t, r, **fields))
    return rows


@case
def nan_null_ints() -> list[Row]:
    """ints, bools and floats beside NaN and null: ints stay ints, a NaN or null value leaves the
    key out of rollout_infos; a huge int is shown exactly."""
    rng = random.Random(111)
    rows = []
    for t, r in grid(5, 4):
        k = (t * 4 + r) % 6
        fields: Row = {
            "reward": float(rng.random() < 0.5),
            "tokens": rng.randint(1, 900),
            "ok": rng.random() < 0.5,
            "ratio": round(rng.random(), 4),
            # beyond 2**53 (float64 would print ...992); spread out within each task: nemo-gym's
            # W&B histogram fails on values that barely differ at this magnitude
            "huge": 2**53 + 1 + r * 10**15 + 2 * t,
        }
        if k == 1:
            fields["tokens"] = NAN
        elif k == 2:
            fields["tokens"] = None
        elif k == 3:
            fields["ok"] = None
        elif k == 4:
            fields["ratio"] = NAN
            fields["ok"] = NAN
        rows.append(row("nan_null_agent", t, r, **fields))
    # Task 5: tokens NaN or null in every rollout (an int field with no value in the task).
    for r in range(3):
        rows.append(row("nan_null_agent", 5, r, reward=1.0, tokens=NAN if r % 2 else None, ok=True, ratio=0.5, huge=r * 10**15))
    return rows


@case
def int_float_mixed() -> list[Row]:
    """A field written as an int in some rows and a float in others (`4` beside `4.5` and `4.0`):
    each row's value is shown as the row typed it."""
    rows = []
    for t, r in grid(4, 4):
        i = t * 4 + r
        reward: Any = [1, 0.5, 0, 1.0][i % 4]
        steps: Any = [3, 3.5, 4.0, 7][(i + t) % 4]
        rows.append(row("mixed_agent", t, r, reward=reward, steps=steps, whole=float(i), count=i))
    return rows


@case
def usage_aalcr_like() -> list[Row]:
    """Rows shaped like nemo-gym's `aalcr` example rollouts: a top-level `input_tokens` (the
    documents' size) beside `response.usage.input_tokens` (what the model read). nemo-gym's stats
    use usage's value, its rollout_infos show the row's own. Also: band fields null but one, a
    judge object, a bool flag, ints; and a second agent whose usage holds a `reward`."""
    rng = random.Random(112)
    bands = ["lt_80k", "80k_100k", "100k_110k", "110k_128k", "128k_plus"]
    rows = []
    for t, r in grid(4, 3):
        doc_tokens = rng.randint(60_000, 140_000)
        band = bands[min(4, max(0, (doc_tokens - 60_000) // 20_000))]
        reward = float(rng.random() < 0.6)
        fields: Row = {
            "question_id": 80 + t,
            "document_category": ["Legal", "Finance"][t % 2],
            "input_tokens": doc_tokens,
            "input_tokens_band": band,
            "invalid_judge_response": rng.random() < 0.2,
            "judge_response": {"verdict": "CORRECT" if reward else "INCORRECT", "usage": {"input_tokens": 900}},
            "reward": reward,
            **{f"reward_{b}": (reward if b == band else None) for b in bands},
        }
        read = doc_tokens + rng.randint(2_000, 9_000)
        out = rng.randint(50, 600)
        usage: Row = {
            "input_tokens": read if (t, r) != (2, 1) else None,  # usage null: the stats lack it, the info shows the row's
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": rng.randint(0, 40)},
            "total_tokens": read + out,
        }
        fields["response"] = {"id": f"resp_{t}_{r}", "output": [], "usage": usage}
        rows.append(row("aalcr_like_agent", t, r, **fields))
    for t, r in grid(2, 2):
        usage = {"input_tokens": 10 + t, "reward": 0.25 * (t + r)}
        rows.append(row("usage_reward_agent", t, r, reward=float(r), input_tokens=5, response={"usage": usage}))
    return rows


@case
def fully_masked_tasks() -> list[Row]:
    """Tasks every rollout of which is masked (the first, the last, one between) are dropped from
    group_level_metrics; a partly masked task stays with its measured rollouts."""
    rows = []
    for t, r in grid(6, 3):
        masked = t in (0, 3, 5) or (t, r) == (2, 0)
        fields: Row = {"reward": float((t + r) % 2), "n": t + r, "mask_sample": masked}
        if masked:
            fields["judge_note"] = 1  # a field only masked rows carry
        rows.append(row("masking_agent", t, r, **fields))
    return rows


def write(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in CASES.items():
        path = out_dir / f"{name}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for r in make():
                f.write(json.dumps(r) + "\n")
        written.append(path)
    return written


@case
def perf_blocks() -> list[Row]:
    """Rollouts carrying `ng_perf` (what NeMo Gym's collection adds with observability on, and
    `collect --trajectory`): an agent whose rollouts all have one (integer counts, an even
    number of them), one where some lack it or lack fields, hold floats, a bool, zero turns or
    a zero coverage; an agent with none (no `perf_summary`)."""
    rng = random.Random(707)
    rows = []
    for t, r in grid(3, 2):
        perf = {"num_turns": 1 + (t + r) % 3, "num_tool_calls": t, "token_observability_coverage": 1.0, "prompt_tokens": 20 + 7 * t + r,
                "cached_prompt_tokens": 0, "completion_tokens": 5 + t * r, "reasoning_tokens": r, "total_latency_ms": round(rng.uniform(200, 4000), 3)}
        rows.append(row("all_observed", t, r, reward=float((t + r) % 2), ng_perf=perf))
    for t, r in grid(4, 3):
        k = t * 3 + r
        fields: Row = {"reward": float(k % 3 == 0)}
        if k % 4 != 3:
            perf = {"num_turns": k % 4, "num_tool_calls": k % 2, "token_observability_coverage": [0.0, 0.5, 1.0][k % 3],
                    "prompt_tokens": 10.5 * k, "completion_tokens": 3 + k, "total_latency_ms": 100 + 37 * k}
            if k % 5 == 1:
                del perf["prompt_tokens"]
            if k == 4:
                perf["reasoning_tokens"] = True
            if k % 6 == 2:
                del perf["total_latency_ms"]
            fields["ng_perf"] = perf
        rows.append(row("partly_observed", t, r, **fields))
    rows += [row("unobserved", t, r, reward=float(t == r)) for t, r in grid(2, 2)]
    return rows



@case
def perf_non_finite() -> list[Row]:
    """`ng_perf` blocks holding NaN (the literal Python writers emit) in the fields the summary
    reads: NeMo Gym's route gets them as null (its client sends rows through orjson) and leaves
    them out; a NaN turn count or completion count leaves the rollout out of tokens per turn.
    Found by scripts/fuzz_nemo_aggregate.py (gym-metrics failed on it: statistics.pstdev of a NaN)."""
    rows = []
    for t, r in grid(3, 3):
        k = t * 3 + r
        perf = {"num_turns": [2, NAN, 1][k % 3], "num_tool_calls": k % 2, "token_observability_coverage": [1.0, NAN][k % 2],
                "prompt_tokens": 10 + k, "completion_tokens": [NAN, 7 + k][k % 4 != 1], "total_latency_ms": [125.5 * k, NAN][k % 5 == 2]}
        rows.append(row("nan_perf", t, r, reward=float(k % 2), ng_perf=perf))
    return rows

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "tests/data/nemo_gym_extra")
    args = parser.parse_args()
    for path in write(args.out):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
