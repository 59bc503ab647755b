"""scripts/bench_nemo_env.py's rows (issue 26): the reference rollouts repeated with unique keys,
each copy expecting the reference's rewards (not timed; the benchmark itself is not run here)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import bench_nemo_env  # noqa: E402


def test_rows_repeat_the_reference_with_unique_keys_and_its_rewards() -> None:
    reference = bench_nemo_env.read_jsonl(bench_nemo_env.DATA / "mcqa" / "rollouts.jsonl")
    rewards = [r["reward"] for r in bench_nemo_env.read_jsonl(bench_nemo_env.DATA / "mcqa" / "verify.jsonl")]
    n = 2 * len(reference) + 4  # two whole copies and part of a third
    rows, expected = bench_nemo_env.build_rows("mcqa", n)
    assert len(rows) == len(expected) == n
    assert len({(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows}) == n
    tasks = 1 + max(r["_ng_task_index"] for r in reference)
    for i, row in enumerate(rows):
        copy, k = divmod(i, len(reference))
        assert row["_ng_task_index"] == reference[k]["_ng_task_index"] + copy * tasks
        assert {key: v for key, v in row.items() if key != "_ng_task_index"} == {
            key: v for key, v in reference[k].items() if key != "_ng_task_index"
        }
        assert expected[i] == rewards[k]
    assert sum(expected) > 0 and min(expected) < max(expected)  # the check can tell right from wrong
