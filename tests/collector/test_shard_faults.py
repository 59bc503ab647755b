"""`collect --processes` (collector/_processes.py) on what a crash or a user leaves behind,
without processes: the `--processes=N` spelling, a left output's cut last line, blank lines and
lines --resume cannot take up, an output not resumed, task lines from another input, a shard
without a log, and a merge past one write's worth of rows."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gym_metrics.collector import Shard, shard_dir, task_lines_path
from gym_metrics.collector._processes import _tail, child_argv, merge_shards, open_shards, redistribute
from gym_metrics.errors import GymMetricsError, InvalidInputError

pytestmark = pytest.mark.timeout(60)


def row(task: int, rollout: int = 0, agent: str = "a") -> bytes:
    return json.dumps({"agent_ref": {"name": agent}, "_ng_task_index": task, "_ng_rollout_index": rollout, "reward": 1.0}).encode() + b"\n"


def test_both_spellings_of_processes_are_left_out_of_a_shards_arguments(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    shard = Shard(1, 3)
    tail = ["--shard", "1/3", "--output", str(shard.output(final)), "--resume"]
    for argv in (["collect", "--processes=3", "--input", "in.jsonl"], ["collect", "--processes", "3", "--input", "in.jsonl"]):
        assert child_argv(argv, shard, final) == ["collect", "--input", "in.jsonl", *tail, "--max-rollout-attempts", "1"]
    assert child_argv(["collect", "--processes=3", "--resume"], shard, final) == ["collect", "--resume", *tail]


def test_a_left_outputs_rows_go_to_their_shards_past_blank_lines_and_without_its_cut_last_line(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    shards = [Shard(i, 2) for i in range(2)]
    shard_dir(final).mkdir()
    shards[0].output(final).write_bytes(row(0))  # held already: not moved again
    final.write_bytes(row(0) + b"\n" + row(1) + b"   \n" + row(2) + row(3)[:-9])  # killed while writing task 3's row
    moved = redistribute(final, shards, None)
    assert moved == 2
    assert shards[0].output(final).read_bytes() == row(0) + row(2)
    assert shards[1].output(final).read_bytes() == row(1)  # task 3, cut short, is collected again


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (b'{"_ng_task_index": "x", "_ng_rollout_index": 0}', "not a rollout row with integer indices (ValueError: invalid literal for int() with base 10: 'x')"),
        (b'{"_ng_task_index": null, "_ng_rollout_index": 0}', "not a rollout row with integer indices (TypeError: int() argument must be a string, a bytes-like object or a real number, not 'NoneType')"),
        (b"[1, 2]", "not a rollout row with integer indices (AttributeError: 'list' object has no attribute 'get')"),
        (b"{not json", "not a rollout row with integer indices (JSONDecodeError: unexpected character, expected a string key: line 1 column 2 (char 1))"),
        (b'{"_ng_task_index": 1}', "_ng_rollout_index: missing"),
    ],
)
def test_a_line_resume_cannot_take_up_is_refused_naming_it_and_the_lock_is_let_go(tmp_path: Path, line: bytes, why: str) -> None:
    final = tmp_path / "out.jsonl"
    final.write_bytes(row(0) + line + b"\n")
    with pytest.raises(InvalidInputError) as refused:
        open_shards(final, 2, resume=True, default_agent=None, log=print)
    assert str(refused.value).startswith(f"{final}: a line --resume cannot take up")
    assert [(v.field, v.description) for v in refused.value.violations] == [("line 2", why)]
    open_shards(final.with_name("other.jsonl"), 2, resume=False, default_agent=None, log=print).close()
    final.write_bytes(row(0))
    open_shards(final, 2, resume=True, default_agent=None, log=print).close()  # the lock was let go: taken again


def test_an_output_not_resumed_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    final.write_bytes(row(0))
    with pytest.raises(GymMetricsError, match=f"^{final} exists and is not empty: pass --resume to continue it, or remove it$"):
        open_shards(final, 2, resume=False, default_agent=None, log=print)
    assert final.read_bytes() == row(0) and not shard_dir(final).exists()


def test_task_lines_of_another_input_in_a_shard_are_refused_on_resume(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    a, b, c = (bytes([n]) * 16 for n in (1, 2, 3))
    task_lines_path(final).write_bytes(a + b)
    shard_dir(final).mkdir()
    task_lines_path(Shard(1, 2).output(final)).write_bytes(a + c)
    with pytest.raises(GymMetricsError) as refused:
        open_shards(final, 2, resume=True, default_agent=None, log=print)
    assert str(refused.value) == (f"the task lines kept for {Shard(1, 2).output(final)} and its shards differ at task 1: they were "
                                  f"collected from different inputs; remove {shard_dir(Shard(1, 2).output(final))} and resume from "
                                  f"{Shard(1, 2).output(final)} alone")  # fmt: skip


def test_a_shard_without_a_log_says_so(tmp_path: Path) -> None:
    assert _tail(tmp_path / "never.log") == "no log"


def test_a_merge_of_more_rows_than_one_write_holds_each_once_in_key_order(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    shard_dir(final).mkdir()
    keys = [(t, r, agent) for t in range(3000) for r in range(2) for agent in ("b", "a")]  # 12,000 rows
    shuffled = keys[:]
    random.Random(7).shuffle(shuffled)
    for index in range(3):
        Shard(index, 3).output(final).write_bytes(b"".join(row(t, r, agent) for t, r, agent in shuffled if t % 3 == index))
    merge_shards(final, 3, None)
    written = [json.loads(line) for line in final.read_bytes().splitlines()]
    assert [(w["_ng_task_index"], w["_ng_rollout_index"], w["agent_ref"]["name"]) for w in written] == sorted(keys)
    assert not shard_dir(final).exists()
