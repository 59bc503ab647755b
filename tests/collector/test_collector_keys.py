"""Task and rollout indices as NeMo Gym 0.7.0 assigns them, and keys that are unambiguous
before anything is written or skipped (issue 24, items 1 and 2).

The expected keys of `mixed_input` were printed by NeMo Gym 0.7.0's own collection
(`RolloutCollectionHelper._preprocess_rows_from_config`, `num_repeats` 1 and 2) on this file.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._transport.client import ResourcesClient
from gym_metrics.collector import CollectOptions, Progress, collect_async
from gym_metrics.collector._input import Rollout, read_input
from gym_metrics.errors import InvalidInputError

from _collector_envs import CountingEnv

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def served() -> AsyncIterator[tuple[CountingEnv, ResourcesClient, str]]:
    env = CountingEnv()
    server = await start_server(env, ServerConfig(port=0, log_requests=False))
    client = ResourcesClient(server.address)
    yield env, client, server.address
    await client.close()
    await server.stop(0)


def quiet() -> Progress:
    return Progress(None, stream=io.StringIO())


def task(name: str, agent: str = "a", **extra: Any) -> dict[str, Any]:
    return {"agent_ref": {"name": agent}, "responses_create_params": {"input": name}, "answer": "x", "expected": "x", **extra}


def mixed_input(path: Path) -> Path:
    """Rows with and without `_ng_task_index`, an identical row again, the same row with
    trailing spaces, with a CRLF ending and as a last line without a newline, another agent."""
    a = json.dumps(task("qa"))
    lines = [
        a + "\n",
        json.dumps(task("qb", _ng_task_index=0)) + "\n",
        json.dumps(task("qc")) + "\n",
        a + "\n",
        json.dumps(task("qd", _ng_task_index=7, _ng_rollout_index=5)) + "\n",
        a + "  \n",
        a + "\r\n",
        json.dumps(task("qe", agent="b", _ng_task_index=1, expected="y")) + "\n",
        a,
    ]
    path.write_bytes("".join(lines).encode())
    return path


NEMO_KEYS_1 = [("a", 0, 0), ("a", 0, 1), ("a", 1, 0), ("a", 0, 2), ("a", 7, 0), ("a", 2, 0), ("a", 0, 3), ("b", 1, 1), ("a", 3, 0)]
NEMO_KEYS_2 = [
    ("a", 0, 0), ("a", 0, 1), ("a", 0, 2), ("a", 0, 3), ("a", 1, 0), ("a", 1, 1), ("a", 0, 4), ("a", 0, 5), ("a", 7, 0),
    ("a", 7, 1), ("a", 2, 0), ("a", 2, 1), ("a", 0, 6), ("a", 0, 7), ("b", 1, 2), ("b", 1, 3), ("a", 3, 0), ("a", 3, 1),
]  # fmt: skip


def keys_of(path: Path) -> list[tuple[str, int, int]]:
    rows = [json.loads(line) for line in path.read_bytes().splitlines()]
    return [(r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows]


@pytest.mark.parametrize("repeats,expected", [(None, NEMO_KEYS_1), (2, NEMO_KEYS_2)], ids=["once", "repeats-2"])
def test_indices_are_nemo_gyms(tmp_path: Path, repeats: int | None, expected: list[tuple[str, int, int]]) -> None:
    """Identical lines share a task index (the next new one is the count of distinct lines
    without an index so far), a given `_ng_task_index` is kept and composes with repeats,
    rollout indices count per task over every agent, a given rollout index is replaced."""
    items = list(read_input(mixed_input(tmp_path / "in.jsonl"), repeats))
    assert all(isinstance(i, Rollout) for i in items)
    assert [(i.agent, i.task, i.rollout) for i in items if isinstance(i, Rollout)] == expected


async def test_given_task_indices_compose_with_num_repeats_end_to_end(
    served: tuple[CountingEnv, ResourcesClient, str], tmp_path: Path
) -> None:
    """`collect --num-repeats 2` of an input with `_ng_task_index` lines runs (it was exit 2)."""
    env, _, address = served
    src, out = mixed_input(tmp_path / "in.jsonl"), tmp_path / "out.jsonl"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gym_metrics.cli", "collect", "--server", address, "--input", str(src),
        "--output", str(out), "--num-repeats", "2",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), timeout=50)
    assert proc.returncode == 0, err.decode()
    assert sorted(keys_of(out)) == sorted(NEMO_KEYS_2) and env.calls == 18
    metrics = {a["agent_ref"]["name"]: a for a in json.loads(out.with_name("out_aggregate_metrics.json").read_bytes())}
    groups = {g["_ng_task_index"]: g for g in metrics["a"]["group_level_metrics"]}
    assert sorted(groups) == [0, 1, 2, 3, 7] and groups[0]["num_rollouts"] == 8


def position_clash_rows() -> list[dict[str, Any]]:
    """The issue's input: line 3 has no task index and would take task 2 by its position, which
    line 20 gives itself; 29 rollouts in all."""
    rows = [task(f"q{i}", expected="x" if i % 3 else "y") for i in range(29)]
    rows[19] = task("q19", _ng_task_index=2, _ng_rollout_index=0)
    return rows


async def test_resume_keeps_every_rollout_of_an_input_whose_line_positions_clash(
    served: tuple[CountingEnv, ResourcesClient, str], tmp_path: Path
) -> None:
    """A fresh run used to stop with a duplicate key (exit 2), and `--resume` after an
    interrupted run took line 20 as done and dropped it (28 rows, missing_num_rollouts 1)."""
    env, client, _ = served
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in position_clash_rows()))
    clean = tmp_path / "clean" / "out.jsonl"
    ref = await collect_async(client, src, clean, CollectOptions(batch_size=4), progress=quiet())
    assert ref.verified == 29 and len(set(keys_of(clean))) == 29
    assert (("a", 2, 0) in keys_of(clean)) and (("a", 2, 1) in keys_of(clean))  # line 3 and line 20 share task 2

    out = tmp_path / "resumed" / "out.jsonl"
    out.parent.mkdir()
    lines = clean.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"".join(lines[:10]) + lines[10][:5])  # killed while writing line 11
    env.calls = 0
    result = await collect_async(client, src, out, CollectOptions(batch_size=4, resume=True), progress=quiet())
    assert result.skipped_done == 10 and result.verified == 19 == env.calls
    assert sorted(keys_of(out)) == sorted(keys_of(clean))
    assert result.metrics_path.read_bytes() == ref.metrics_path.read_bytes()
    agent = json.loads(result.metrics_path.read_bytes())[0]
    assert all(g.get("missing_num_rollouts", 0) == 0 for g in agent["group_level_metrics"])


def clashing_rollouts(path: Path) -> Path:
    """Finished rollouts (a reward, both indices) and tasks; lines 2 and 5 hold one key."""
    scored = {"agent_ref": {"name": "a"}, "_ng_task_index": 0, "reward": 1.0}
    rows = [
        {**scored, "_ng_rollout_index": 0},
        {**scored, "_ng_rollout_index": 1},
        task("q1"),
        task("q2"),
        {**scored, "_ng_rollout_index": 1, "reward": 0.0},
        task("q3"),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


async def test_a_repeated_key_is_refused_before_anything_is_written_or_skipped(
    served: tuple[CountingEnv, ResourcesClient, str], tmp_path: Path
) -> None:
    """Fresh: refused before any verify and before the output exists (it was found after the
    whole run). Resume: refused before the output is repaired or any line skipped (it was
    exit 0 with the second line taken as done)."""
    env, client, address = served
    src = clashing_rollouts(tmp_path / "in.jsonl")
    out = tmp_path / "out.jsonl"
    with pytest.raises(InvalidInputError, match="rollouts given twice") as info:
        await collect_async(client, src, out, progress=quiet())
    (violation,) = info.value.violations
    assert (violation.row_name, violation.row) == ("line", 5) and "first at line 2" in violation.description
    assert env.calls == 0 and not out.exists()

    partial = src.read_bytes().splitlines(keepends=True)[:2]
    out.write_bytes(b"".join(partial) + b'{"agent_ref": {"na')  # an interrupted run
    before = out.read_bytes()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gym_metrics.cli", "collect", "--server", address, "--input", str(src),
        "--output", str(out), "--resume",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), timeout=50)
    assert proc.returncode == 2, err.decode()
    assert "line 5" in err.decode() and "Traceback" not in err.decode()
    assert out.read_bytes() == before and env.calls == 0


async def test_counted_rollouts_pass_over_the_fixed_keys_of_their_task(
    served: tuple[CountingEnv, ResourcesClient, str], tmp_path: Path
) -> None:
    """A task's finished rollouts keep their indices wherever they are in the file; its lines
    to verify take the free ones (before: the clash of a task line with a later rollout)."""
    env, client, _ = served
    rows = [
        task("q", _ng_task_index=4),
        {"agent_ref": {"name": "a"}, "_ng_task_index": 4, "_ng_rollout_index": 0, "reward": 1.0},
        {"agent_ref": {"name": "a"}, "_ng_task_index": 4, "_ng_rollout_index": 2, "reward": 0.0},
        task("q", _ng_task_index=4),
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    result = await collect_async(client, src, out, progress=quiet())
    assert result.verified == 2 and result.passed_through == 2
    assert sorted(keys_of(out)) == [("a", 4, r) for r in range(4)]


async def test_a_scored_line_whose_index_is_past_64_bits_is_a_bad_input_line(
    served: tuple[CountingEnv, ResourcesClient, str], tmp_path: Path
) -> None:
    """It was written to the output, whose aggregation then failed naming the output's line."""
    _, client, _ = served
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": 0, "reward": 1.0} for t in (0, 2**63, 1)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(InvalidInputError, match="bad input line") as info:
        await collect_async(client, src, tmp_path / "out.jsonl", progress=quiet())
    (violation,) = info.value.violations
    assert (violation.row_name, violation.row, violation.field) == ("line", 2, "_ng_task_index") and "64-bit" in violation.description
    result = await collect_async(client, src, tmp_path / "skip.jsonl", CollectOptions(on_bad_line="skip"), progress=quiet())
    assert [b.line for b in result.bad_lines] == [2] and keys_of(tmp_path / "skip.jsonl") == [("a", 0, 0), ("a", 1, 0)]


async def test_a_skipped_bad_line_keeps_its_task_index_so_fixing_it_and_resuming_is_exact(served: Any, tmp_path: Path) -> None:
    """The workflow the bad-line error names: skip it, fix it, `--resume`. The skipped line took
    no task index, so once fixed it took the index of the line after it (already written), that
    line the next one's: the fixed line was never run and another ran twice."""
    _, client, _ = served

    def line(q: str) -> str:
        return json.dumps({"agent_ref": {"name": "a"}, "q": q, "answer": q, "expected": q}) + "\n"

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(line("A") + '{"agent_ref": {"name": "a"}, oops\n' + line("B") + line("C"))
    await collect_async(client, src, out, CollectOptions(on_bad_line="skip", keep_input_fields=True))
    src.write_text(line("A") + line("X") + line("B") + line("C"))
    await collect_async(client, src, out, CollectOptions(resume=True, keep_input_fields=True))
    written = sorted((r["_ng_task_index"], r["q"]) for r in map(json.loads, out.read_text().splitlines()))
    assert written == [(0, "A"), (1, "X"), (2, "B"), (3, "C")]


async def test_resuming_with_an_input_whose_lines_moved_is_refused_naming_the_line(served: Any, tmp_path: Path) -> None:
    """A line inserted before others between a killed run and `--resume` shifted every counted
    task index: the output's rows were taken for other lines (one line lost, another run twice)
    without a word. The line each task was made from is kept beside the output (16 bytes a
    task), so the changed input is refused; the same input resumes as before."""
    _, client, _ = served

    def line(q: str) -> str:
        return json.dumps({"agent_ref": {"name": "a"}, "q": q, "answer": q, "expected": q}) + "\n"

    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text(line("A") + line("B") + line("C"))
    await collect_async(client, src, out, CollectOptions())
    out.write_text("".join(out.read_text().splitlines(keepends=True)[:2]))  # what a run killed after two rows wrote
    src.write_text(line("Z") + line("A") + line("B") + line("C"))
    with pytest.raises(InvalidInputError) as refused:
        await collect_async(client, src, out, CollectOptions(resume=True))
    assert refused.value.violations[0].row == 1 and "task 0 was made from another line" in refused.value.violations[0].description
    src.write_text(line("A") + line("B") + line("C"))
    await collect_async(client, src, out, CollectOptions(resume=True))
    assert len(out.read_text().splitlines()) == 3
