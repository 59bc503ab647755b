"""The collector in-process, against real grpc.aio servers on 127.0.0.1:0.

Fault injection with subprocesses (SIGKILL of the collector or the server) is in
test_collector_faults.py.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._transport.client import (
    ResourcesClient,
    ServerUnavailableError,
    ServerUnreachableError,
    VerifiedBatch,
    VerifyOutcome,
)
from gym_metrics.aggregate import AggregateOptions, aggregate_file
from gym_metrics.collector import CollectOptions, Progress, RetryPolicy, collect_async
from gym_metrics.collector._input import Rollout, read_input
from gym_metrics.collector._verify import make_batches, verify_all
from gym_metrics.errors import GymMetricsError, InvalidInputError
from gym_metrics.environments import SimpleResourcesServer
from gym_metrics_servers.math_exact import SAMPLE_PATH, MathExactServer

from _collector_envs import CountingEnv

pytestmark = pytest.mark.timeout(30)

Connect = Callable[[SimpleResourcesServer], Awaitable[ResourcesClient]]


@pytest.fixture
async def connect() -> AsyncIterator[Connect]:
    """`client = await connect(env)`: a real server for `env` on a free port, and a client."""
    servers, clients = [], []

    async def start(env: SimpleResourcesServer) -> ResourcesClient:
        server = await start_server(env, ServerConfig(port=0, log_requests=False))
        servers.append(server)
        client = ResourcesClient(server.address)
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()
    for server in servers:
        await server.stop(0)


def quiet() -> Progress:
    return Progress(None, stream=io.StringIO())


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def metrics_path(out: Path) -> Path:
    return out.with_name(f"{out.stem}_aggregate_metrics.json")


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def keys(rows: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    return [(r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows]


# ----------------------------------------------------------------------------- math_exact sample


async def test_math_exact_sample_matches_offline_aggregate_byte_for_byte(connect: Connect, tmp_path: Path) -> None:
    client = await connect(MathExactServer())
    out = tmp_path / "run" / "rollouts.jsonl"
    result = await collect_async(client, SAMPLE_PATH, out, progress=quiet())

    rows = lines_of(out)
    assert len(rows) == 144 == result.verified
    assert result.passed_through == result.skipped_done == 0 and not result.bad_lines
    assert len(set(keys(rows))) == 144
    assert all(isinstance(r["reward"], float) and "is_correct" in r and "_gm_error" not in r for r in rows)

    assert result.metrics_path == metrics_path(out)
    data = json.loads(result.metrics_path.read_bytes())
    names = [a["agent_ref"]["name"] for a in data]
    assert names == sorted(names) == ["medium_agent", "strong_agent", "weak_agent"]
    by_agent = {a["agent_ref"]["name"]: a for a in data}
    for name, agent in by_agent.items():
        rewards = [r["reward"] for r in rows if r["agent_ref"]["name"] == name]
        assert len(rewards) == 48
        key = agent["key_metrics"]
        assert key["mean/reward"] == pytest.approx(sum(rewards) / 48)
        assert set(key) == {"mean/reward", "pass@1[avg-of-k]", "pass@4"}
        assert 0.0 <= key["mean/reward"] <= key["pass@4"] <= 1.0
        assert len(agent["group_level_metrics"]) == 12
    assert by_agent["weak_agent"]["key_metrics"]["mean/reward"] < by_agent["medium_agent"]["key_metrics"][
        "mean/reward"
    ] < by_agent["strong_agent"]["key_metrics"]["mean/reward"]

    # The strongest statement: `gym-metrics aggregate OUT --env math_exact` (default options,
    # no expected tasks or repeats) writes the very same bytes as the collector did.
    env = MathExactServer()
    offline, _, _ = aggregate_file(
        out,
        tmp_path / "offline.json",
        options=AggregateOptions(),
        compute_metrics=env.compute_metrics,
        get_key_metrics=env.get_key_metrics,
    )
    assert offline.read_bytes() == result.metrics_path.read_bytes()


# ----------------------------------------------------------------------------- input shapes


async def test_num_repeats_expands_task_lines_with_line_positions(connect: Connect, tmp_path: Path) -> None:
    env = CountingEnv()
    client = await connect(env)
    src = write_jsonl(
        tmp_path / "tasks.jsonl",
        [
            {"agent_ref": {"name": "b"}, "answer": "x", "expected": "x"},
            {"agent_ref": {"name": "a"}, "answer": "x", "expected": "y"},
            {"agent_ref": {"name": "b"}, "answer": "y", "expected": "y", "_ng_rollout_index": 7},
        ],
    )
    out = tmp_path / "out.jsonl"
    result = await collect_async(client, src, out, CollectOptions(num_repeats=3, batch_size=2), progress=quiet())

    rows = lines_of(out)
    assert result.verified == 9 == len(rows) == env.calls
    # task index = 0-based line position; rollout index 0..K-1 (a given rollout index is replaced)
    assert sorted(keys(rows)) == sorted(
        [("b", 0, r) for r in range(3)] + [("a", 1, r) for r in range(3)] + [("b", 2, r) for r in range(3)]
    )
    assert sorted(env.seen) == sorted((t, r) for t in range(3) for r in range(3))
    data = {a["agent_ref"]["name"]: a for a in json.loads(result.metrics_path.read_bytes())}
    assert list(data) == ["a", "b"]
    assert [g["_ng_task_index"] for g in data["b"]["group_level_metrics"]] == [0, 2]
    assert data["a"]["agent_metrics"]["mean/reward"] == 0.0
    assert data["b"]["agent_metrics"]["mean/reward"] == 1.0
    assert all(g["expected_num_rollouts"] == 3 for a in data.values() for g in a["group_level_metrics"])
    offline, _, _ = aggregate_file(out, tmp_path / "offline.json")
    assert offline.read_bytes() == result.metrics_path.read_bytes()


@pytest.mark.parametrize("with_bad_line", [False, True], ids=["columnar", "per-line"])
async def test_rows_with_reward_pass_through_unchanged_and_unverified(
    connect: Connect, tmp_path: Path, with_bad_line: bool
) -> None:
    """Both input paths: whole chunks read column-wise, and line by line (a bad line in the
    chunk sends it there)."""
    env = CountingEnv()
    client = await connect(env)
    scored = [  # odd spacing and key order: the bytes must survive as they are
        '{"agent_ref": {"name": "a"},   "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 0.25, "note": "kept"}',
        '{"reward": 1, "_ng_rollout_index": 1, "_ng_task_index": 0, "agent_ref": {"name": "a"}}',
    ]
    to_verify = [
        {"agent_ref": {"name": "a"}, "_ng_task_index": 1, "_ng_rollout_index": 0, "answer": "q", "expected": "q"},
        {"agent_ref": {"name": "a"}, "_ng_task_index": 1, "_ng_rollout_index": 1, "answer": "q", "expected": "r"},
    ]
    lines: list[Any] = [scored[0], to_verify[0], scored[1], to_verify[1]]
    if with_bad_line:
        lines.append("{not json")
    src = write_jsonl(tmp_path / "mixed.jsonl", lines)
    out = tmp_path / "out.jsonl"
    result = await collect_async(client, src, out, CollectOptions(on_bad_line="skip"), progress=quiet())

    assert [b.line for b in result.bad_lines] == ([5] if with_bad_line else [])
    assert result.passed_through == 2 and result.verified == 2
    assert env.calls == 2 and sorted(env.seen) == [(1, 0), (1, 1)]
    out_lines = out.read_bytes().splitlines()
    assert len(out_lines) == 4
    for line in scored:
        assert out_lines.count(line.encode()) == 1
    metrics = json.loads(result.metrics_path.read_bytes())[0]["agent_metrics"]
    assert metrics["mean/reward"] == pytest.approx((0.25 + 1 + 1 + 0) / 4)


async def test_verify_exceptions_mark_only_their_rollouts_failed(connect: Connect, tmp_path: Path) -> None:
    env = CountingEnv()
    client = await connect(env)
    rows = []
    for t in range(4):
        for r in range(3):
            answer = "boom" if (t, r) in {(1, 0), (3, 2)} else ("ok" if r else "no")
            rows.append({"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r,
                         "answer": answer, "expected": "ok"})  # fmt: skip
    src = write_jsonl(tmp_path / "in.jsonl", rows)

    out = tmp_path / "plain" / "out.jsonl"
    result = await collect_async(client, src, out, CollectOptions(batch_size=5), progress=quiet())
    written = {(r["_ng_task_index"], r["_ng_rollout_index"]): r for r in lines_of(out)}
    assert len(written) == 12 and result.verified == 12
    for key, row in written.items():
        if key in {(1, 0), (3, 2)}:
            assert row["_gm_error"]["kind"] == "verify_failed"
            assert "boom" in row["_gm_error"]["message"]
            assert "reward" not in row
        else:
            assert "_gm_error" not in row and row["reward"] == (1.0 if key[1] else 0.0)
    agent = json.loads(result.metrics_path.read_bytes())[0]["agent_metrics"]
    assert agent["errors/total"] == 2 and agent["errors/verify_failed"] == 2
    assert agent["mean/reward"] == pytest.approx(7 / 10)  # the failed two are left out

    out0 = tmp_path / "zero" / "out.jsonl"
    result0 = await collect_async(
        client, src, out0, CollectOptions(batch_size=5, count_errors_as_zero=True), progress=quiet()
    )
    agent0 = json.loads(result0.metrics_path.read_bytes())[0]["agent_metrics"]
    assert agent0["errors/total"] == 2
    assert agent0["mean/reward"] == pytest.approx(7 / 12)  # ... or count as 0.0
    assert out0.read_bytes().count(b'"_gm_error"') == 2

    # Offline aggregation of either output, with the same count_errors_as_zero, gives the
    # same bytes (the env has no compute_metrics: the collector sent only each task's sample).
    for path, as_zero in ((result.metrics_path, False), (result0.metrics_path, True)):
        rollouts = path.with_name("out.jsonl")
        offline, _, _ = aggregate_file(
            rollouts, tmp_path / "offline.json", options=AggregateOptions(count_errors_as_zero=as_zero)
        )
        assert offline.read_bytes() == path.read_bytes()


# ----------------------------------------------------------------------------- bad lines

GOOD = {"agent_ref": {"name": "a"}, "answer": "x", "expected": "x"}
BAD_LINES = [  # (line text, field the error names)
    ('{"agent_ref": {"name": "a"}, "answer": ', "json"),
    ('{"answer": "x", "expected": "x"}', "agent_ref.name"),
    ('{"agent_ref": {"name": 3}, "answer": "x"}', "agent_ref.name"),
    ('{"agent_ref": "a", "answer": "x"}', "agent_ref.name"),
    ('{"agent_ref": {"name": "a"}, "_ng_task_index": -1}', "_ng_task_index"),
    ('{"agent_ref": {"name": "a"}, "_ng_task_index": 1.5}', "_ng_task_index"),
    ('{"agent_ref": {"name": "a"}, "_ng_task_index": "2"}', "_ng_task_index"),
    # a line to verify gets its rollout index counted (as NeMo Gym); a scored line's own is checked
    ('{"agent_ref": {"name": "a"}, "_ng_task_index": 5, "_ng_rollout_index": -2, "reward": 1}', "_ng_rollout_index"),
    ('{"agent_ref": {"name": "a"}, "_ng_task_index": 5, "_ng_rollout_index": true, "reward": 1}', "_ng_rollout_index"),
    ('[1, 2, 3]', "row"),
]


@pytest.mark.parametrize("bad,field", BAD_LINES, ids=[f"{i}-{f}" for i, (_, f) in enumerate(BAD_LINES)])
async def test_bad_line_fails_naming_line_and_field(connect: Connect, tmp_path: Path, bad: str, field: str) -> None:
    env = CountingEnv()
    client = await connect(env)
    src = write_jsonl(tmp_path / "in.jsonl", [GOOD, GOOD, GOOD, bad, GOOD])
    out = tmp_path / "out.jsonl"
    with pytest.raises(InvalidInputError) as info:
        await collect_async(client, src, out, CollectOptions(batch_size=1), progress=quiet())
    (violation,) = info.value.violations
    assert (violation.row, violation.row_name, violation.field) == (4, "line", field)
    assert "line 4" in str(info.value) and field in str(info.value)
    assert not metrics_path(out).exists()
    # The lines before the bad one were verified and written (whole lines); none after it.
    # GOOD is one task (identical lines share a task index, as in NeMo Gym): rollouts 0, 1, 2.
    assert sorted(keys(lines_of(out))) == [("a", 0, r) for r in range(3)]

    # Fix the line and resume: the run completes as if nothing had happened.
    write_jsonl(src, [GOOD, GOOD, GOOD, GOOD, GOOD])
    result = await collect_async(client, src, out, CollectOptions(batch_size=1, resume=True), progress=quiet())
    assert result.skipped_done == 3 and result.verified == 2
    assert sorted(keys(lines_of(out))) == [("a", 0, r) for r in range(5)]
    assert json.loads(result.metrics_path.read_bytes())[0]["agent_metrics"]["mean/reward"] == 1.0


async def test_bad_lines_skipped_are_all_reported(connect: Connect, tmp_path: Path) -> None:
    env = CountingEnv()
    client = await connect(env)
    lines: list[Any] = [GOOD]
    for bad, _ in BAD_LINES:
        lines += [bad, GOOD]
    src = write_jsonl(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out.jsonl"
    result = await collect_async(client, src, out, CollectOptions(on_bad_line="skip"), progress=quiet())
    assert [(b.line, b.field) for b in result.bad_lines] == [(2 + 2 * i, f) for i, (_, f) in enumerate(BAD_LINES)]
    assert all(b.reason for b in result.bad_lines)
    good = 1 + len(BAD_LINES)  # identical lines: one task, its rollouts counted
    assert sorted(keys(lines_of(out))) == [("a", 0, r) for r in range(good)]
    assert result.verified == env.calls == good
    groups = json.loads(result.metrics_path.read_bytes())[0]["group_level_metrics"]
    assert [g["_ng_task_index"] for g in groups] == [0]


def test_read_input_reports_bad_lines_in_order(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", [GOOD, "", BAD_LINES[0][0], GOOD])
    items = list(read_input(src, None))
    assert isinstance(items[0], Rollout) and (items[0].task, items[0].rollout) == (0, 0)
    assert (items[1].line, items[1].field) == (3, "json")  # type: ignore[union-attr]
    assert isinstance(items[2], Rollout) and (items[2].task, items[2].rollout) == (0, 1)  # the same line again


# ----------------------------------------------------------------------------- resume


def hash_rows(n_tasks: int, agents: tuple[str, ...] = ("a", "b")) -> list[dict[str, Any]]:
    rows = []
    for agent in agents:
        for t in range(n_tasks):
            answer = "boom" if t % 7 == 3 else str(t % 3)
            rows.append({"agent_ref": {"name": agent}, "answer": answer, "expected": "1"})
    return rows


async def test_resume_repairs_truncated_line_and_ends_with_identical_metrics(
    connect: Connect, tmp_path: Path
) -> None:
    env = CountingEnv()
    client = await connect(env)
    src = write_jsonl(tmp_path / "tasks.jsonl", hash_rows(20))
    opts = CollectOptions(num_repeats=4, batch_size=8)

    clean = tmp_path / "clean" / "out.jsonl"
    ref = await collect_async(client, src, clean, opts, progress=quiet())
    assert ref.verified == 160 and env.calls == 160
    reference = ref.metrics_path.read_bytes()
    clean_lines = clean.read_bytes().splitlines(keepends=True)

    # A run killed while writing line 58: 57 whole lines and half of the next.
    out = tmp_path / "killed" / "out.jsonl"
    out.parent.mkdir()
    partial = clean_lines[57][: len(clean_lines[57]) // 2]
    out.write_bytes(b"".join(clean_lines[:57]) + partial)
    env.calls = 0
    log = io.StringIO()
    result = await collect_async(
        client, src, out, CollectOptions(num_repeats=4, batch_size=8, resume=True), progress=Progress(None, log)
    )
    assert result.repaired_bytes == len(partial)
    assert result.skipped_done == 57 and result.verified == 103 == env.calls
    assert f"cut a partial last line ({len(partial)} bytes)" in log.getvalue()
    assert result.metrics_path.read_bytes() == reference
    written = keys(lines_of(out))
    assert len(written) == len(set(written)) == 160
    assert sorted(out.read_bytes().splitlines(keepends=True)) == sorted(clean_lines)

    # Resuming a finished run verifies nothing and rewrites the same metrics.
    env.calls = 0
    again = await collect_async(
        client, src, out, CollectOptions(num_repeats=4, batch_size=8, resume=True), progress=quiet()
    )
    assert again.verified == env.calls == 0 and again.skipped_done == 160 and again.repaired_bytes == 0
    assert again.metrics_path.read_bytes() == reference


async def test_resume_of_a_file_cut_inside_its_first_line(connect: Connect, tmp_path: Path) -> None:
    client = await connect(CountingEnv())
    src = write_jsonl(tmp_path / "tasks.jsonl", hash_rows(5))
    clean = tmp_path / "clean" / "out.jsonl"
    reference = (await collect_async(client, src, clean, CollectOptions(num_repeats=2), progress=quiet())).metrics_path
    out = tmp_path / "cut" / "out.jsonl"
    out.parent.mkdir()
    out.write_bytes(b'{"agent_ref": {"na')
    result = await collect_async(client, src, out, CollectOptions(num_repeats=2, resume=True), progress=quiet())
    assert result.repaired_bytes == 18 and result.skipped_done == 0 and result.verified == 20
    assert result.metrics_path.read_bytes() == reference.read_bytes()


async def test_resume_with_rows_already_scored(connect: Connect, tmp_path: Path) -> None:
    """Pass-through rows and verified rows interleaved; the resumed run skips both kinds."""
    env = CountingEnv()
    client = await connect(env)
    rows: list[dict[str, Any]] = []
    for t in range(30):
        for r in range(2):
            row: dict[str, Any] = {"agent_ref": {"name": "ab"[t % 2]}, "_ng_task_index": t, "_ng_rollout_index": r}
            if (t + r) % 3 == 0:
                row["reward"] = (t % 4) / 4
            else:
                row.update(answer=str(t % 3), expected="1")
            rows.append(row)
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    clean = tmp_path / "clean" / "out.jsonl"
    ref = await collect_async(client, src, clean, CollectOptions(batch_size=4), progress=quiet())
    assert ref.passed_through == 20 and ref.verified == 40 == env.calls

    lines = clean.read_bytes().splitlines(keepends=True)
    out = tmp_path / "resumed" / "out.jsonl"
    out.parent.mkdir()
    out.write_bytes(b"".join(lines[:33]) + lines[33][:-7])
    env.calls = 0
    result = await collect_async(client, src, out, CollectOptions(batch_size=4, resume=True), progress=quiet())
    assert result.skipped_done == 33 and result.passed_through + result.verified == 27 and env.calls == result.verified
    assert result.metrics_path.read_bytes() == ref.metrics_path.read_bytes()
    assert sorted(out.read_bytes().splitlines(keepends=True)) == sorted(lines)


async def test_input_repeating_a_rollout_is_named_not_a_server_error(connect: Connect, tmp_path: Path) -> None:
    """Lines to verify get their rollout indices counted per task (NeMo Gym): given ones that
    repeat are replaced. Finished rollouts (a reward) that repeat a key are refused, naming
    the lines, before anything is written."""
    env = CountingEnv()
    client = await connect(env)
    row = {"agent_ref": {"name": "a"}, "_ng_task_index": 2, "_ng_rollout_index": 1, "answer": "x", "expected": "x"}
    src = write_jsonl(tmp_path / "in.jsonl", [row, {**row, "_ng_rollout_index": 0}, row])
    result = await collect_async(client, src, tmp_path / "out.jsonl", progress=quiet())
    assert sorted(keys(lines_of(tmp_path / "out.jsonl"))) == [("a", 2, 0), ("a", 2, 1), ("a", 2, 2)]
    assert result.verified == 3

    scored = {"agent_ref": {"name": "a"}, "_ng_task_index": 2, "_ng_rollout_index": 1, "reward": 1.0}
    src = write_jsonl(tmp_path / "in2.jsonl", [scored, {**scored, "_ng_rollout_index": 0}, scored, row])
    out = tmp_path / "out2.jsonl"
    env.calls = 0
    with pytest.raises(InvalidInputError, match="rollouts given twice") as info:
        await collect_async(client, src, out, progress=quiet())
    (violation,) = info.value.violations
    assert (violation.row_name, violation.row) == ("line", 3)
    assert "('a', 2, 1) again (first at line 1)" in violation.description
    assert not out.exists() and env.calls == 0


async def test_empty_input_writes_an_empty_metrics_list(connect: Connect, tmp_path: Path) -> None:
    env = CountingEnv()
    client = await connect(env)
    src = write_jsonl(tmp_path / "in.jsonl", [])
    result = await collect_async(client, src, tmp_path / "out.jsonl", progress=quiet())
    assert result.verified == env.calls == 0
    assert json.loads(result.metrics_path.read_bytes()) == []


async def test_existing_output_without_resume_is_a_clear_error(connect: Connect, tmp_path: Path) -> None:
    env = CountingEnv()
    client = await connect(env)
    src = write_jsonl(tmp_path / "in.jsonl", [GOOD])
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0}\n')
    before = out.read_bytes()
    with pytest.raises(GymMetricsError, match="--resume"):
        await collect_async(client, src, out, progress=quiet())
    assert out.read_bytes() == before and env.calls == 0
    assert not metrics_path(out).exists()


async def test_missing_input_is_a_clear_error(connect: Connect, tmp_path: Path) -> None:
    client = await connect(CountingEnv())
    with pytest.raises(InvalidInputError, match="no such input file"):
        await collect_async(client, tmp_path / "nope.jsonl", tmp_path / "out.jsonl", progress=quiet())


# ----------------------------------------------------------------------------- progress


async def test_progress_on_a_non_terminal_writes_collect_lines(connect: Connect, tmp_path: Path) -> None:
    client = await connect(MathExactServer())
    stream = io.StringIO()
    progress = Progress(144, stream=stream)
    assert not progress.live
    await collect_async(client, SAMPLE_PATH, tmp_path / "out.jsonl", progress=progress)
    lines = stream.getvalue().splitlines()
    assert lines and all(line.startswith("collect: ") for line in lines)
    assert "144/144 rollouts" in lines[-1] and "0 errors" in lines[-1]
    assert "strong_agent 0.917" in lines[-1]
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()


def test_progress_on_a_terminal_redraws_one_line() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Tty()
    progress = Progress(4, stream=stream)
    assert progress.live
    progress.add("a", 1.0)
    progress.add("a", None, error=True)
    progress.tick(force=True)
    progress.close()
    text = stream.getvalue()
    assert text.startswith("\r\x1b[2K") and text.endswith("\n") and "collect:" not in text
    assert "2/4 rollouts" in text and "1 errors" in text and "a 1.000" in text


# ----------------------------------------------------------------------------- batching and retries


def make_rollouts(n: int, pad: int = 0) -> list[Rollout]:
    return [Rollout("a", i, 0, {"i": i, "pad": "x" * pad}, False) for i in range(n)]


def test_batches_are_bounded_by_count_and_bytes() -> None:
    batches = list(make_batches(iter(make_rollouts(10)), max_items=4, max_bytes=1 << 20))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert [r.task for b in batches for r, _ in b] == list(range(10))

    batches = list(make_batches(iter(make_rollouts(10, pad=1000)), max_items=100, max_bytes=3500))
    assert all(sum(len(body) for _, body in b) <= 3500 for b in batches)
    assert [len(b) for b in batches] == [3, 3, 3, 1]

    huge = make_rollouts(3, pad=10_000)
    assert [len(b) for b in make_batches(iter(huge), max_items=100, max_bytes=5000)] == [1, 1, 1]


def test_batches_keep_what_was_read_before_the_input_fails() -> None:
    def rollouts() -> Any:
        yield from make_rollouts(5)
        raise InvalidInputError("bad line")

    batches = make_batches(rollouts(), max_items=2, max_bytes=1 << 20)
    assert [[r.task for r, _ in next(batches)] for _ in range(3)] == [[0, 1], [2, 3], [4]]
    with pytest.raises(InvalidInputError, match="bad line"):
        next(batches)


class FlakyStreamClient:
    """Stands in for ResourcesClient.verify_batches: answers batches after a delay and breaks
    the stream (UNAVAILABLE) on chosen calls after taking more batches than it answered.

    Like grpc, a broken call's request reader is not cancelled: it may still pull one more
    request from the caller's iterator, which then fails to send and is lost.
    """

    def __init__(self, break_after: dict[int, int]) -> None:
        self.break_after = break_after  # call number -> batches answered before breaking
        self.calls = 0
        self.max_outstanding = 0
        self.received: list[list[str]] = []  # batch ids per call, as they arrived
        self.answered: list[list[str]] = []
        self.dropped: list[str] = []  # pulled by a reader after its call had ended
        self.readers: list[asyncio.Task[None]] = []

    async def verify_batches(self, requests: Any) -> AsyncIterator[tuple[str, list[VerifyOutcome]]]:
        call = self.calls
        self.calls += 1
        self.received.append([])
        self.answered.append([])
        queue: asyncio.Queue[Any] = asyncio.Queue()
        ended = False

        async def read() -> None:
            async for batch_id, items in requests:
                if ended:
                    self.dropped.append(batch_id)
                    return
                self.received[call].append(batch_id)
                queue.put_nowait((batch_id, items))
                outstanding = len(self.received[call]) - len(self.answered[call])
                self.max_outstanding = max(self.max_outstanding, outstanding)
            queue.put_nowait(None)

        self.readers.append(asyncio.create_task(read()))
        answered = 0
        try:
            while True:
                if call in self.break_after and answered >= self.break_after[call]:
                    await asyncio.sleep(0.01)  # let more batches arrive unanswered
                    raise ServerUnavailableError("UNAVAILABLE: injected")
                await asyncio.sleep(0.001)
                item = await queue.get()
                if item is None:
                    return
                batch_id, items = item
                answered += 1
                self.answered[call].append(batch_id)
                yield batch_id, [VerifyOutcome(t, r, float(t % 2), {"reward": float(t % 2)}) for t, r, _ in items]
        finally:
            ended = True


async def test_verify_all_bounds_in_flight_and_never_records_a_batch_twice() -> None:
    client = FlakyStreamClient(break_after={0: 3, 1: 0, 2: 5})
    recorded: list[tuple[int, int]] = []
    log: list[str] = []

    def on_results(batch: list[tuple[Rollout, bytes]], verified: VerifiedBatch) -> None:
        for (rollout, _), t, r in zip(batch, verified.task_index, verified.rollout_index, strict=True):
            assert (rollout.task, rollout.rollout) == (t, r)
            recorded.append((rollout.task, rollout.rollout))

    batches = make_batches(iter(make_rollouts(200)), max_items=7, max_bytes=1 << 20)
    await asyncio.wait_for(
        verify_all(
            client,  # type: ignore[arg-type]
            batches,
            on_results,
            max_in_flight=3,
            retry=RetryPolicy(max_retries=2, base_s=0.001, max_s=0.002),
            log=log.append,
        ),
        timeout=10,
    )
    for reader in client.readers:
        reader.cancel()
    assert sorted(recorded) == [(i, 0) for i in range(200)]  # each exactly once
    # One retry per injected break: no batch was lost to a dead call's reader, which would
    # show as one more retry ("closed the stream with batches unanswered").
    assert not client.dropped
    assert client.calls == 4 and len(log) == 3, log
    assert all(line.startswith("collect: server unavailable (UNAVAILABLE: injected)") for line in log)
    assert client.max_outstanding <= 3
    # Every call after a break starts by resending the batches left unanswered, same ids.
    for k in range(1, client.calls):
        unanswered = [i for i in client.received[k - 1] if i not in client.answered[k - 1]]
        assert unanswered and client.received[k][: len(unanswered)] == unanswered
    answered = Counter(i for call in client.answered for i in call)
    assert set(answered.values()) == {1}
    # 3 breaks pass with max_retries=2: the count resets whenever the server answers.


async def test_unreachable_server_fails_after_the_connect_timeout(tmp_path: Path) -> None:
    """A server never reached is not retried: the first connection fails after the connect
    timeout, naming the address and grpc's reason."""
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    src = write_jsonl(tmp_path / "in.jsonl", [GOOD])
    log = io.StringIO()
    async with ResourcesClient(f"127.0.0.1:{port}") as client:
        with pytest.raises(ServerUnreachableError, match=f"cannot reach the server at 127.0.0.1:{port}: UNAVAILABLE"):
            await collect_async(
                client,
                src,
                tmp_path / "out.jsonl",
                CollectOptions(connect_timeout=0.5, retry=RetryPolicy(max_retries=2, base_s=0.01, max_s=0.02)),
                progress=Progress(None, log),
            )
    assert "collect: server unavailable" not in log.getvalue()
    assert not (tmp_path / "out.jsonl").exists()


class MaskingEnv(SimpleResourcesServer):
    """Odd tasks' rollouts masked (mask_sample) with reward 0: out of the mean."""

    async def verify(self, body: Any) -> Any:
        from gym_metrics.models import BaseVerifyResponse

        task = int(body.model_extra.get("t", 0)) if body.model_extra else 0
        return BaseVerifyResponse(reward=0.0 if task % 2 else 1.0, mask_sample=bool(task % 2))  # type: ignore[call-arg]


async def test_the_progress_lines_mean_leaves_masked_rollouts_out_as_the_metrics_do(connect: Connect, tmp_path: Path) -> None:
    """It said 0.500 where the metrics file said 1.0."""
    client = await connect(MaskingEnv())
    src = write_jsonl(tmp_path / "in.jsonl", [{"agent_ref": {"name": "a"}, "response": {"output": []}, "responses_create_params": {"input": "q"},
                                               "_ng_task_index": t, "_ng_rollout_index": 0, "t": t} for t in range(4)])  # fmt: skip
    stream = io.StringIO()
    result = await collect_async(client, src, tmp_path / "out.jsonl", progress=Progress(4, stream=stream))
    assert "mean reward: a 1.000" in stream.getvalue().splitlines()[-1]
    assert orjson.loads(result.metrics_path.read_bytes())[0]["agent_metrics"]["mean/reward"] == 1.0
