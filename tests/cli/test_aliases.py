"""Old spellings of command-line flags keep working (old Python names are tested, table-driven,
in tests/test_deprecations.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from gym_metrics._util.deprecated import OLD_FLAGS, old_flags_used
from gym_metrics.cli import _parser, main


def test_compare_takes_reducer_and_its_old_spelling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t + r + i) % 2)}
        for i, agent in enumerate("ab")
        for t in range(4)
        for r in range(2)
    ]
    src = tmp_path / "r.jsonl"
    src.write_text("".join(json.dumps(row) + "\n" for row in rows))
    outputs, notes = [], []
    for flag in ("--reducer", "--metric"):
        assert main(["compare", str(src), "--agents", "a", "b", flag, "pass@1", "--json"]) == 0
        captured = capsys.readouterr()
        outputs.append(json.loads(captured.out))
        notes.append(captured.err)
    assert outputs[0] == outputs[1] and outputs[0]["comparisons"][0]["metric"] == "pass@1"
    assert "deprecated" not in notes[0]
    assert "gym-metrics compare: --metric is deprecated; use --reducer (removal in 0.3.0)" in notes[1]


@pytest.mark.parametrize(("command", "old", "new"), [(c, o, n) for c, flags in OLD_FLAGS.items() for o, n in flags.items()])
def test_every_old_flag_is_still_a_spelling_of_its_replacement(command: str, old: str, new: str) -> None:
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    options = sub._option_string_actions
    assert old in options and new in options and options[old] is options[new]
    assert old_flags_used(command, ["x", f"{old}=1"]) == [(old, new)] and old_flags_used(command, [new]) == []
