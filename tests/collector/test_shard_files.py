"""The files `collect --processes` keeps beside an output, without processes: the task lines a
resume checks, joined over shards; a merge that cannot be written; a shard's log as its failure
quotes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gym_metrics.collector import Shard, shard_dir, task_lines_path
from gym_metrics.collector._keys import ANY_LINE, InputChanged, carry_task_lines
from gym_metrics.collector._processes import ATTEMPT, _tail


def _lines(out: Path, *records: bytes) -> None:
    task_lines_path(out).write_bytes(b"".join(records))


def test_task_lines_join_the_longest_and_a_skipped_lines_slot_takes_anothers(tmp_path: Path) -> None:
    a, b, c = (bytes([n]) * 16 for n in (1, 2, 3))
    one, two, final = tmp_path / "0.jsonl", tmp_path / "1.jsonl", tmp_path / "out.jsonl"
    _lines(one, a, ANY_LINE)
    _lines(two, a, b, c)
    carry_task_lines([one, two], final)
    assert task_lines_path(final).read_bytes() == a + b + c
    _lines(two, a, c)  # task 1 made from another line than the output's
    with pytest.raises(InputChanged) as changed:
        carry_task_lines([two], final)
    assert changed.value.task == 1 and task_lines_path(final).read_bytes() == a + b + c  # left as it was


def test_a_merge_that_cannot_be_written_leaves_no_half_file_and_keeps_the_shards(tmp_path: Path) -> None:
    final = tmp_path / "out.jsonl"
    shards = [Shard(i, 2) for i in range(2)]
    shard_dir(final).mkdir()
    for shard in shards:
        rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": 0, "pad": "x" * 2000} for t in range(shard.index, 40, 2)]
        shard.output(final).write_text("".join(json.dumps(r) + "\n" for r in rows))
    script = (
        "import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000)); "  # a file size limit, as `ulimit -f`
        "from pathlib import Path; from gym_metrics.collector._processes import merge_shards; from gym_metrics.errors import GymMetricsError\n"
        f"try: merge_shards(Path({str(final)!r}), 2, None)\nexcept GymMetricsError as exc: print(exc); sys.exit(2)"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write {final} from its shards" in done.stdout and "run again with --resume" in done.stdout
    assert not final.with_name(f".{final.name}.merging").exists() and not final.exists()
    assert all(s.output(final).stat().st_size for s in shards)


def test_a_shards_failure_quotes_its_own_attempts_lines(tmp_path: Path) -> None:
    log = tmp_path / "0-of-2.log"
    log.write_bytes(ATTEMPT + b"error: the earlier run's bad line 4\n" + ATTEMPT + b"error: this run's cause\n")
    assert _tail(log) == "its last lines: error: this run's cause"
