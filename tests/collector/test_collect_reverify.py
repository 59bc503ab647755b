"""`collect --reverify`: rows that already carry a reward are verified again (their indices
kept) instead of passing through, the stored reward kept beside the new one; the summary counts
the rewards that differ. Without it, a file of scored rows is said to have been passed through
(checking a port against stored rewards would otherwise match by construction)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

from gym_metrics import ResourcesClient
from gym_metrics.cli._collect import report
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.testing import serve_environment
from gym_metrics_servers.math_exact.app import MathExactServer


def _response(text: str) -> dict[str, object]:
    return {"output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}]}


def _rows(path: Path) -> Path:
    # task 7 rollout 3 answers right and says so; task 7 rollout 4 answers wrong but stored 1.0;
    # task 9 rollout 0 answers right but stored 0 (a port that scores differently shows here)
    rows = [(7, 3, "The answer is 4", 1.0), (7, 4, "The answer is 5", 1.0), (9, 0, "The answer is 6", 0)]
    path.write_text("".join(
        json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "expected_answer": "4" if t == 7 else "6",
                    "response": _response(text), "reward": stored}) + "\n"
        for t, r, text, stored in rows
    ))  # fmt: skip
    return path


async def test_reverify_scores_every_row_again_and_keeps_the_stored_reward(tmp_path: Path) -> None:
    rows = _rows(tmp_path / "rows.jsonl")
    async with serve_environment(MathExactServer()) as server, ResourcesClient(server.address) as client:
        result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions(reverify=True))
    written = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert set(written) == {(7, 3), (7, 4), (9, 0)}  # the given indices, not renumbered
    assert {k: (r["reward"], r["_gm_stored_reward"]) for k, r in written.items()} == {(7, 3): (1.0, 1.0), (7, 4): (0.0, 1.0), (9, 0): (1.0, 0)}
    assert (result.verified, result.passed_through, result.reverified, result.rewards_changed) == (3, 0, 3, 2)
    metrics = json.loads((tmp_path / "out_aggregate_metrics.json").read_text())[0]
    assert metrics["agent_metrics"]["mean/reward"] == 2 / 3 and not any("stored" in k for k in metrics["agent_metrics"])
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        report(result, 1.0)
    assert "--reverify: 2 of 3 rewards differ from the stored ones" in printed.getvalue()


async def test_a_row_that_fails_again_is_not_a_changed_reward(tmp_path: Path) -> None:
    """Rows the environment refused on --reverify (no new reward) were counted as rewards that
    differ: "5 of 5 rewards differ" when all five failed."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "response": _response("4"), "reward": 1.0}) + "\n")
    async with serve_environment(MathExactServer()) as server, ResourcesClient(server.address) as client:
        result = await collect_async(client, bad, tmp_path / "out.jsonl", CollectOptions(reverify=True))  # no expected_answer: refused
    assert (result.reverified, result.rewards_changed) == (0, 0)


async def test_without_reverify_scored_rows_pass_through_and_the_summary_says_so(tmp_path: Path) -> None:
    rows = _rows(tmp_path / "rows.jsonl")
    async with serve_environment(MathExactServer()) as server, ResourcesClient(server.address) as client:
        result = await collect_async(client, rows, tmp_path / "out.jsonl", CollectOptions())
    assert (result.verified, result.passed_through) == (0, 3)
    assert (tmp_path / "out.jsonl").read_bytes() == rows.read_bytes()
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        report(result, 1.0)
    assert "every row already carried a reward, so nothing was verified; --reverify" in printed.getvalue()
