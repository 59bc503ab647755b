"""scripts/check_nemo_env.py's comparison: what counts as a difference from NeMo Gym's answers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from check_nemo_env import differences  # noqa: E402


def test_equal_within_1e_9_and_added_keys_are_not_differences() -> None:
    theirs = {"agent_metrics": {"mean/reward": 0.5, "max/reward": 1.0}, "group_level_metrics": [{"sample": {}, "mean/reward": 1}]}
    mine = {
        "agent_metrics": {"mean/reward": 0.5 * (1 + 1e-12), "max/reward": 1.0, "wilson_ci_low_95/reward": 0.1, "coverage/masked_rollouts": 0},
        "group_level_metrics": [{"mean/reward": 1.0}],
        "non_numeric_counts": {},
    }
    assert differences(theirs, mine) == []


def test_a_value_a_missing_key_an_extra_key_and_a_length_are_differences() -> None:
    theirs = {"a": 1.0, "b": [1, 2], "c": "x"}
    mine = {"a": 1.001, "b": [1], "d": 3}
    assert sorted(differences(theirs, mine, "m")) == [
        "m.a: 1.001 != NeMo Gym's 1.0",
        "m.b: 1 items, NeMo Gym 2",
        "m.c: missing",
        "m.d: not in NeMo Gym's",
    ]
    assert differences(float("nan"), float("nan")) == []
    assert differences(True, 1, "x") == ["x: 1 != NeMo Gym's True"] and differences(True, True) == []
