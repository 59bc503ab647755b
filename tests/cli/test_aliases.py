"""Old spellings of command-line flags keep working (old Python names are tested, table-driven,
in tests/test_deprecations.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gym_metrics.cli import main


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
