"""What the reasoning-gym tests share: the run's seed (datasets and seeds are drawn from it, so
each run tries ones no one chose; GYM_METRICS_TEST_SEED replays a run), the `dataset` command
run in process, reasoning-gym's own reward for a text, and an entry compared as reasoning-gym
made it (a tuple is not a list)."""

from __future__ import annotations

import math
import os
import random
import secrets
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

import _ci
from gym_metrics.cli import main

INSTALL = "pip install -e '.[dev]' (it brings the reasoning-gym extra)"

RUN_SEED = int(os.environ.get("GYM_METRICS_TEST_SEED") or secrets.randbelow(2**32))
"""Printed in every failure message: `GYM_METRICS_TEST_SEED=<it> pytest ...` runs the same draw."""


def rg() -> ModuleType:
    """reasoning_gym; the test skips without it (fails under CI=true: the dev extra brings it)."""
    return _ci.need_module("reasoning_gym", INSTALL)


def names() -> list[str]:
    """Every dataset reasoning-gym registers (its mixing dataset aside)."""
    from reasoning_gym.factory import DATASETS

    return sorted(name for name in DATASETS if name != "composite")


HASH_ORDERED = frozenset(
    {"codeio", "intermediate_integration", "isomorphic_strings", "knight_swap", "polynomial_multiplication", "ransom_note", "word_ladder"}
)
"""Datasets of reasoning-gym 0.1.25 whose entries follow PYTHONHASHSEED (they iterate sets of
strings; intermediate_integration's answer is sympy's antiderivative, which picks one of equal
forms by hash order: `-sin(9*x + 2)**2/2 + C` or `cos(9*x + 2)**2/2 + C`): a process started with
another hash seed (a spawned worker) builds other entries."""


def generated(dataset: Any, index: int) -> dict[str, Any]:
    """`dataset[index]` as reasoning-gym generates it with Python's and numpy's global generators
    seeded by the entry's seed (the dataset's seed + index), as the dataset command generates
    it: codeio's reference programs draw from them, so unseeded they give a new answer key
    each time (test_codeio_rows_are_the_same_each_time)."""
    import numpy as np

    state, np_state = random.getstate(), np.random.get_state()
    random.seed(dataset.seed + index)
    np.random.seed((dataset.seed + index) % 2**32)
    try:
        return dict(dataset[index])
    finally:
        random.setstate(state)
        np.random.set_state(np_state)


def dataset_command(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    """`gym-metrics dataset reasoning-gym ARGS -o FILE`, in this process; its rows."""
    out = tmp_path / f"rows_{secrets.token_hex(4)}.jsonl"
    code = main(["dataset", "reasoning-gym", *args, "-o", str(out)])
    assert code == 0, (args, f"run seed {RUN_SEED}")
    return [orjson.loads(line) for line in out.read_bytes().splitlines()]


def reasoning_gym_reward(dataset: Any, entry: dict[str, Any], text: str) -> float:
    """reasoning-gym's own reward: its extract_answer, its dataset's score_answer; 0.0 where
    that raises, as its evaluation (eval/eval.py) scores it."""
    from reasoning_gym.utils import extract_answer

    try:
        return float(dataset.score_answer(answer=extract_answer(text), entry=entry))
    except Exception:
        return 0.0


def same(a: Any, b: Any) -> bool:
    """Equal values in equal containers (a tuple is not a list; NaN equals NaN)."""
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)
