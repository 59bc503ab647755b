"""RewardClient(record=PATH) on a file it finds there, against a real environment server: a last
line a killed trainer left half-written is cut (also one longer than the 64 KiB the cut reads at
a time, and a file that is all one partial line); a file not written by a reward client gets its
task indices numbered on past any index it could hold."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from gym_metrics.integrations import RewardClient
from gym_metrics.testing import serve_environment

pytestmark = pytest.mark.timeout(60)

GROUP = ({"responses_create_params": {"input": "What is 1+1?"}, "expected_answer": "2"}, ["2", "no"])


def record_once(record: Path) -> list[dict[str, object]]:
    """One group of two completions scored with `record`; the rows the file holds after."""

    async def run() -> None:
        async with serve_environment("math_exact") as server:
            client = RewardClient(server.address, record=record)
            try:
                await client.score_async([GROUP], step=3)
            finally:
                client.close()

    asyncio.run(run())
    data = record.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


def whole_row(task: int) -> bytes:
    return json.dumps({"reward": 1.0, "agent_ref": {"name": "step_0"}, "_ng_task_index": task, "_ng_rollout_index": 0}).encode() + b"\n"


@pytest.mark.parametrize("partial", [b'{"reward": 0.0, "_ng_ta', b'{"pad": "' + b"x" * 200_000])
def test_a_half_written_last_line_is_cut_and_the_tasks_number_on(tmp_path: Path, partial: bytes) -> None:
    record = tmp_path / "rollouts.jsonl"
    record.write_bytes(whole_row(0) + whole_row(1) + partial)
    rows = record_once(record)
    assert len(rows) == 4 and rows[:2] == [json.loads(whole_row(0)), json.loads(whole_row(1))]
    assert [(r["_ng_task_index"], r["_ng_rollout_index"], r["agent_ref"]) for r in rows[2:]] == [(2, 0, {"name": "step_3"}), (2, 1, {"name": "step_3"})]
    assert [r["reward"] for r in rows[2:]] == [1.0, 0.0]


def test_a_file_that_is_one_partial_line_is_emptied_first(tmp_path: Path) -> None:
    record = tmp_path / "rollouts.jsonl"
    record.write_bytes(b'{"pad": "' + b"y" * 150_000)
    rows = record_once(record)
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows] == [(0, 0), (0, 1)]


def test_a_file_of_other_rows_gets_task_indices_past_its_line_count(tmp_path: Path) -> None:
    record = tmp_path / "rollouts.jsonl"
    others = b'{"note": "kept"}\n' * 5
    record.write_bytes(others)
    rows = record_once(record)
    assert record.read_bytes().startswith(others) and rows[:5] == [{"note": "kept"}] * 5
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows[5:]] == [(5, 0), (5, 1)]
