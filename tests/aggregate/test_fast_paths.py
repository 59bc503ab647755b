"""The engine's fast paths give the bytes its general paths give: streamed chunked reading,
quantiles without full sorts, repeats by transpose, looked-up tokens, deferred samples, and
group rendering in forked workers."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from gym_metrics.aggregate import AggregateOptions, aggregate_file
from gym_metrics.errors import GymMetricsError
from gym_metrics.rollouts import read_rollouts
from gym_metrics.aggregate import _stats
from gym_metrics.aggregate.render import _forked, _output, _texts
from gym_metrics.rollouts import _reader
from gym_metrics.aggregate._repeats import _by_repeat


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def mixed_rows(tasks: int, repeats: int, seed: int = 0) -> list[dict[str, Any]]:
    """Tasks x repeats with masks, failures, a missing field, -0.0, ints and text: every
    branch of sample choice and rendering gets something."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(tasks):
        for r in rng.permutation(repeats).tolist():
            row: dict[str, Any] = {
                "agent_ref": {"name": "a" if t % 3 else "b"},
                "_ng_task_index": t,
                "_ng_rollout_index": r,
                "reward": float(rng.integers(0, 2)),
                "latency": round(float(rng.gamma(2.0, 0.5)), 4),
                "calls": int(rng.integers(0, 4)),
                "note": f"task {t}",
            }
            if t % 7 == 0 and r == 0:
                row["_ng_mask"] = True  # the sample must skip it
            if t % 11 == 0 and r == 1:
                row["_gm_error"] = {"kind": "verify_error", "message": "boom"}
            if t % 5 == 0:
                row["latency"] = -0.0
            if t % 13 == 0:
                del row["calls"]
            rows.append(row)
    return rows


def agg_bytes(path: Path, out: Path, **options: Any) -> bytes:
    aggregate_file(path, out, options=AggregateOptions(**options), keep_rows=False)
    return out.read_bytes()


@pytest.mark.parametrize("errors_as_zero", [False, True])
def test_streamed_chunks_and_dropped_text_change_no_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errors_as_zero: bool
) -> None:
    """Whole-file read with every row kept vs tiny chunks keeping only sample candidates (rows
    out of order, so a task's first rollout often sits in a later chunk)."""
    path = write_rows(tmp_path / "r.jsonl", mixed_rows(60, 5))
    whole = read_rollouts(path)
    kept = read_rollouts(path, keep_rows=False)
    assert kept.rows_read == whole.rows_read
    reference = agg_bytes(path, tmp_path / "a.json", count_errors_as_zero=errors_as_zero)
    monkeypatch.setattr(_reader, "CHUNK_BYTES", 700)
    assert agg_bytes(path, tmp_path / "b.json", count_errors_as_zero=errors_as_zero) == reference
    monkeypatch.setattr(_reader, "_read_fast", lambda *args: None)  # the per-line reader, chunked
    assert agg_bytes(path, tmp_path / "c.json", count_errors_as_zero=errors_as_zero) == reference


def test_a_dropped_row_is_never_read_silently(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "r.jsonl", mixed_rows(4, 3))
    cols = read_rollouts(path, keep_rows=False).agents["a"]
    assert cols.rows is not None
    kept = set(_reader.sample_candidates(cols).tolist())
    dropped = next(i for i in range(len(cols)) if i not in kept)
    with pytest.raises(LookupError, match="not kept"):
        cols.rows.load([dropped])


def test_bad_lines_are_numbered_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [json.dumps({"agent_ref": {"name": "a"}, "_ng_task_index": i, "_ng_rollout_index": 0, "reward": 1.0}) for i in range(40)]
    rows[29] = "{not json"
    (tmp_path / "r.jsonl").write_text("\n".join(rows) + "\n")
    monkeypatch.setattr(_reader, "CHUNK_BYTES", 300)
    result = read_rollouts(tmp_path / "r.jsonl", on_bad_line="skip")
    assert [b.line for b in result.bad_lines] == [30]
    assert result.rows_read == 39


@pytest.mark.parametrize("width", [1, 2, 5, 8, 64, 65, 300])
def test_quantiles_of_equal_groups_match_the_sorting_path(width: int) -> None:
    rng = np.random.default_rng(width)
    groups = max(1, 3000 // width)
    values = np.round(rng.normal(size=groups * width), 2)  # ties, and -0.0 beside 0.0
    values[::17] = -0.0
    starts = np.arange(0, len(values), width)
    count = np.full(groups, float(width))
    qs = (0.5, 0.25, 0.75)
    fast = _stats.group_quantiles(values, np.ones(len(values), bool), starts, count, qs)
    general = {q: _stats.quantile_sorted(_stats.sort_within_groups(values, starts), starts, count, q) for q in qs}
    for q in qs:
        assert fast[q].tobytes() == general[q].tobytes()
        assert np.allclose(fast[q], np.quantile(values.reshape(groups, width), q, axis=1))


def test_repeat_order_by_transpose_matches_lexsort() -> None:
    tasks = np.repeat(np.arange(50), 4)
    repeats = np.tile(np.array([0, 2, 5, 9]), 50)
    assert np.array_equal(_by_repeat(tasks, repeats, 50), np.lexsort((tasks, repeats)))
    repeats[7] = 3  # one task with other repeats: the general sort
    assert np.array_equal(_by_repeat(tasks, repeats, 50), np.lexsort((tasks, repeats)))


def test_samples_are_made_when_read_and_a_set_sample_stays(tmp_path: Path) -> None:
    path = write_rows(tmp_path / "r.jsonl", mixed_rows(10, 3))
    cols = read_rollouts(path).agents["a"]
    from gym_metrics.aggregate import Aggregator

    agg = Aggregator("a")
    agg.add(cols)
    groups = agg.finalize().groups
    assert all(s is None for s in groups.samples)  # nothing made yet
    groups.samples[0] = b'{"set":1}'
    made = groups.samples_at()
    assert made[0] == b'{"set":1}' and all(isinstance(s, bytes) for s in made[1:])
    assert orjson.loads(made[1])["note"] == f"task {groups.task_index[1]}"


@pytest.mark.skipif(sys.platform != "linux", reason="forked render workers are Linux-only")
def test_forked_workers_write_the_serial_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_output, "CHUNK", 16)
    monkeypatch.setattr(_forked, "MIN_ROLLOUTS_PER_WORKER", 50)
    monkeypatch.delitem(sys.modules, "grpc", raising=False)  # the test process may have loaded it
    monkeypatch.setattr(_forked.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    path = write_rows(tmp_path / "r.jsonl", mixed_rows(300, 4))
    monkeypatch.setenv("GYM_METRICS_RENDER_WORKERS", "1")
    serial = agg_bytes(path, tmp_path / "serial.json")
    monkeypatch.setenv("GYM_METRICS_RENDER_WORKERS", "3")
    assert len(_output._ranges(_groups_of(path), 16)) == 3
    assert agg_bytes(path, tmp_path / "forked.json") == serial
    assert not list(tmp_path.glob(".gym-metrics-render-*"))  # the workers' parts are gone


@pytest.mark.skipif(sys.platform != "linux", reason="forked render workers are Linux-only")
def test_a_failing_worker_costs_time_not_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_output, "CHUNK", 16)
    monkeypatch.setattr(_forked, "MIN_ROLLOUTS_PER_WORKER", 50)
    monkeypatch.delitem(sys.modules, "grpc", raising=False)
    monkeypatch.setattr(_forked.os, "sched_getaffinity", lambda pid: {0, 1})
    path = write_rows(tmp_path / "r.jsonl", mixed_rows(200, 4))
    monkeypatch.setenv("GYM_METRICS_RENDER_WORKERS", "1")
    serial = agg_bytes(path, tmp_path / "serial.json")
    monkeypatch.setenv("GYM_METRICS_RENDER_WORKERS", "2")
    parent = os.getpid()
    real = _output.iter_group_json

    def dies_in_a_worker(groups: Any, start: int = 0, stop: int | None = None) -> Any:
        if os.getpid() != parent:
            raise RuntimeError("worker failure")
        return real(groups, start, stop)

    monkeypatch.setattr(_output, "iter_group_json", dies_in_a_worker)
    assert agg_bytes(path, tmp_path / "forked.json") == serial



@pytest.mark.skipif(sys.platform != "linux", reason="forked render workers are Linux-only")
def test_a_failing_writer_stops_its_workers_and_leaves_no_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's own range fails (a full disk, an interrupt): the error is the caller's,
    the workers are reaped (none left running or a zombie) and their part files removed."""
    monkeypatch.setattr(_output, "CHUNK", 16)
    monkeypatch.setattr(_forked, "MIN_ROLLOUTS_PER_WORKER", 50)
    monkeypatch.delitem(sys.modules, "grpc", raising=False)
    monkeypatch.setattr(_forked.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    monkeypatch.setenv("GYM_METRICS_RENDER_WORKERS", "3")
    path = write_rows(tmp_path / "r.jsonl", mixed_rows(300, 4))
    parent, real = os.getpid(), _output.iter_group_json
    started: list[int] = []
    spawn = _forked._spawn

    def spawned(*args: Any) -> Any:
        worker = spawn(*args)
        started.append(worker.pid)
        return worker

    def fails_here(groups: Any, start: int = 0, stop: int | None = None) -> Any:
        if os.getpid() == parent and start == 0:
            raise OSError(28, "No space left on device")
        return real(groups, start, stop)

    monkeypatch.setattr(_forked, "_spawn", spawned)
    monkeypatch.setattr(_output, "iter_group_json", fails_here)
    out = tmp_path / "out.json"
    with pytest.raises(GymMetricsError) as caught:
        agg_bytes(path, out)
    assert str(caught.value) == f"cannot write {out}: No space left on device" and not out.exists()
    assert len(started) == 2 and not _forked._live
    for pid in started:
        with pytest.raises(ChildProcessError):  # waited for already: not running, not a zombie
            os.waitpid(pid, os.WNOHANG)
    assert not list(tmp_path.glob(".gym-metrics-render-*"))


@pytest.mark.skipif(sys.platform != "linux", reason="forked render workers are Linux-only")
def test_a_filesystem_without_copy_file_range_gets_the_same_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_output, "CHUNK", 16)
    monkeypatch.setattr(_forked, "MIN_ROLLOUTS_PER_WORKER", 50)
    monkeypatch.delitem(sys.modules, "grpc", raising=False)
    monkeypatch.setattr(_forked.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    path = write_rows(tmp_path / "r.jsonl", mixed_rows(300, 4))
    monkeypatch.setenv("GYM_METRICS_RENDER_WORKERS", "1")
    serial = agg_bytes(path, tmp_path / "serial.json")
    monkeypatch.setenv("GYM_METRICS_RENDER_WORKERS", "3")
    calls: list[int] = []

    def unsupported(src: int, dst: int, count: int, *args: Any) -> int:
        calls.append(count)
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(_forked.os, "copy_file_range", unsupported)
    assert agg_bytes(path, tmp_path / "forked.json") == serial
    assert len(calls) == 2  # each worker's part, then through a buffer

def _groups_of(path: Path) -> Any:
    from gym_metrics.aggregate import Aggregator

    agg = Aggregator("a")
    agg.add(read_rollouts(path).agents["a"])
    return agg.finalize().groups


@pytest.mark.parametrize("size", [1, 4, 64, 5000])
def test_chunks_are_whole_lines_of_any_length(tmp_path: Path, size: int) -> None:
    data = b"\n".join(b"x" * n for n in (1, 5, 300, 2, 0, 1000, 3))  # no final newline
    (tmp_path / "r.jsonl").write_bytes(data)
    chunks = list(_reader.read_chunks(tmp_path / "r.jsonl", size))
    assert b"".join(chunks) == data
    assert all(c.endswith(b"\n") for c in chunks[:-1]) and all(chunks)


def test_a_pipe_is_read_as_a_stream(tmp_path: Path) -> None:
    import threading

    data = b"".join(b'{"n": %d}\n' % i for i in range(500))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=fifo.write_bytes, args=(data,))
    writer.start()
    chunks = list(_reader.read_chunks(fifo, 256))
    writer.join(timeout=10)
    assert b"".join(chunks) == data and all(c.endswith(b"\n") for c in chunks)


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("repeats", [1, 2, 7])
def test_filled_chunks_match_the_per_task_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repeats: int, native: bool
) -> None:
    rows = [
        {"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t + r) % 2),
         "p%ct": t * 0.5, "n": r}
        for t in range(40) for r in range(repeats)
    ]  # fmt: skip
    path = write_rows(tmp_path / "r.jsonl", rows)
    monkeypatch.setattr(_output, "CHUNK", 16)
    if not native:
        monkeypatch.setattr(_texts, "_native", None)
    made: list[bytes | None] = []
    real = _output._filled

    def recorded(*args: Any) -> bytes | None:
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(_output, "_filled", recorded)
    fast = agg_bytes(path, tmp_path / "fast.json")
    assert made and all(m is not None for m in made)  # every chunk was filled column-wise
    monkeypatch.setattr(_output, "_filled", lambda *a: None)
    assert agg_bytes(path, tmp_path / "general.json") == fast


class _PerTask:
    """An environment whose compute_metrics gives per-task entries: `kind` says which shape."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def entry(self, t: int) -> dict[str, Any]:
        if self.kind == "columns":  # ints and floats, the same keys in one order: filled column-wise
            return {"pass@1": t % 2, "pass@2": 1, "mean_reward": t / 3, "big": 2**62 + t}
        if self.kind == "ragged":  # a key only some tasks have
            return {"pass@1": t % 2, **({"hard": 1.5} if t % 5 == 0 else {})}
        if self.kind == "mixed":  # an int column with a float in it, and a bool
            return {"score": 0.5 if t == 7 else 1, "ok": t % 3 == 0}
        if self.kind == "nan":
            return {"score": float("nan") if t == 3 else 0.25}
        return {"num_rollouts": 99, "pass@1": t % 2}  # a key of the entry's own (the environment's wins)


@pytest.mark.parametrize("kind", ["columns", "ragged", "mixed", "nan", "clash"])
def test_per_task_metrics_render_as_the_per_task_path_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """compute_metrics' per_task_metrics (math_exact's pass@k per task) are written column-wise
    when every task has the same numeric keys, which collect's metrics file took 4 of its 10 s
    to write one dict at a time at 1M rollouts; any other shape goes the per-task way. Either way
    the bytes are those of the per-task path (every chunk rendered from dicts)."""
    env = _PerTask(kind)

    def per_task(columns: Any) -> dict[str, Any]:
        return {"per_task_metrics": [{"_ng_task_index": t, **env.entry(t)} for t in columns.task_index.tolist()]}

    rows = [
        {"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t + r) % 2), "n": r}
        for t in range(40) for r in range(3)
    ]  # fmt: skip
    path = write_rows(tmp_path / "r.jsonl", rows)
    monkeypatch.setattr(_output, "CHUNK", 16)
    heads: list[bool] = []
    real_head = _output._head_parts

    def recorded(*args: Any) -> Any:
        made = real_head(*args)
        heads.append(made is not None)
        return made

    monkeypatch.setattr(_output, "_head_parts", recorded)

    def aggregated(out: Path) -> bytes:
        aggregate_file(path, out, compute_metrics_columns=per_task, keep_rows=False)
        return out.read_bytes()

    fast = aggregated(tmp_path / "fast.json")
    assert heads and all(heads) == (kind == "columns"), heads
    entry = json.loads(fast)[0]["group_level_metrics"][10]
    assert all(entry[k] == v for k, v in env.entry(10).items())  # the environment's values (num_rollouts 99 in the clash)
    monkeypatch.setattr(_output, "_head_parts", lambda *a: None)
    assert aggregated(tmp_path / "per_task.json") == fast


@pytest.mark.parametrize("size", [1, 7, 1 << 20])
def test_read_chunks_limit_gives_the_first_lines(tmp_path: Path, size: int) -> None:
    """`limit`: the first N lines whatever the chunk size (a blank line counts; the last line
    may lack its newline), all of them when N is past the end."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"a\n\nbcd\ne\nfgh")
    for limit, expected in ((1, b"a\n"), (2, b"a\n\n"), (4, b"a\n\nbcd\ne\n"), (5, b"a\n\nbcd\ne\nfgh"), (99, b"a\n\nbcd\ne\nfgh")):
        assert b"".join(_reader.read_chunks(path, size, limit)) == expected, (size, limit)
