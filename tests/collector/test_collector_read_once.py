"""Each input line is parsed once: chunks that cannot hold a `reward` key skip the column-wise
pass, and rows with plain keys skip the per-field checks. Both give what the full path gives."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gym_metrics._transport.server import ServerConfig, start_server
from gym_metrics._transport.client import ResourcesClient
from gym_metrics.collector import CollectOptions, Progress, collect_async
from gym_metrics.collector import _input
from gym_metrics.collector._input import may_hold_key, read_input
from gym_metrics.collector._rows import with_agent_ref

from _collector_envs import CountingEnv

pytestmark = pytest.mark.timeout(30)

ROWS = [
    b'{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "answer": "x", "expected": "x"}',
    b'{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 1, "answer": "y", "expected": "x"}',
    b'{"agent_ref": {"name": "a"}, "_ng_task_index": 1.0, "_ng_rollout_index": 0, "answer": "x"}',  # float index
    b'{"agent_ref": {"name": "a"}, "task_index": 2, "rollout_index": 3, "answer": "x"}',  # aliases
    b'{"agent_ref": {"name": "b"}, "_ng_task_index": 3, "_ng_rollout_index": 0, "reward": 0.25}',  # scored
    b'{"agent_ref": {"name": "b"}, "_ng_task_index": 3, "_ng_rollout_index": 1, "rew\\u0061rd": 0.5}',  # scored, escaped key
    b'{"agent_ref": {"name": "b"}, "_ng_task_index": 4, "_ng_rollout_index": 0, "reward": true}',
    b'{"_ng_task_index": 5, "_ng_rollout_index": 0, "answer": "x"}',  # no agent: --agent names it
    b'{"agent_ref": {"name": "c"}, "_ng_task_index": 6}',  # no rollout index: 0
    b'  {"agent_ref": {"name": "c"}, "_ng_task_index": 7, "_ng_rollout_index": 2, "answer": "\xc3\xa9"}  ',
    b'{"_ng_task_index": 8, "_ng_rollout_index": 0, "reward": 1.0} ',  # scored, no agent: the key appended
    b'{"agent_ref": null, "_ng_task_index": 8, "_ng_rollout_index": 1, "reward": 0.0}',  # scored, written again
    b'{"agent_ref": {"type": "t"}, "task_index": 9, "rollout_index": 0, "reward": 1}',  # aliases, a ref without a name
]


def test_may_hold_key() -> None:
    assert may_hold_key(b'{"reward": 1}', b"reward")
    assert may_hold_key(b'{"rew\\u0061rd": 1}', b"reward")  # the key, spelled with an escape
    assert may_hold_key(b'{"x": "\\u0041"}', b"reward")  # any escaped ASCII: maybe
    assert not may_hold_key(b'{"x": "\\u00e9 rewarded", "rewards": 1}', b"reward")
    assert not may_hold_key(b'{"x": 1}\n{"y": 2}\n', b"reward")


@pytest.mark.parametrize(
    ("line", "written"),
    [
        (b"{}", b'{"agent_ref":{"name":"x"}}'),
        (b'{ "a": 1 }\r', b'{ "a": 1,"agent_ref":{"name":"x"}}'),
        (b'{"agent_ref": null, "a": [1]}', b'{"agent_ref":{"name":"x"},"a":[1]}'),
        (b'{"agent_ref": {"type": "t", "name": null}}', b'{"agent_ref":{"type":"t","name":"x"}}'),
        (b'{"agent\\u005fref": {}}', b'{"agent_ref":{"name":"x"}}'),
    ],
)
def test_a_line_named_by_agent_gets_its_agent_ref(line: bytes, written: bytes) -> None:
    assert with_agent_ref(line, "x") == written
    assert orjson.loads(written)["agent_ref"]["name"] == "x"


def _items(path: Path) -> list[Any]:
    return [vars(i) if not hasattr(i, "chunk") else ("scored", i.text()) for i in read_input(path, None, "dflt")]


def test_quick_paths_read_what_the_full_checks_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "in.jsonl"
    for rows in (ROWS, [r for r in ROWS if b"reward" not in r and b"\\u" not in r]):
        src.write_bytes(b"\n".join(rows) + b"\n")
        quick = _items(src)
        with monkeypatch.context() as m:
            m.setattr(_input, "_plain_keys", lambda row: None)
            m.setattr(_input, "may_hold_key", lambda chunk, key: True)
            assert _items(src) == quick


@pytest.fixture
async def client() -> AsyncIterator[tuple[ResourcesClient, CountingEnv]]:
    env = CountingEnv()
    server = await start_server(env, ServerConfig(port=0, log_requests=False))
    c = ResourcesClient(server.address)
    try:
        yield c, env
    finally:
        await c.close()
        await server.stop(0)


@pytest.mark.parametrize("rows", [ROWS, [r for r in ROWS if b"reward" not in r]], ids=["mixed", "unscored"])
async def test_collect_output_is_byte_identical_to_the_full_path(
    client: tuple[ResourcesClient, CountingEnv], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[bytes]
) -> None:
    c, env = client
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"\n".join(rows) + b"\n")
    outs = []
    for full in (False, True):
        with monkeypatch.context() as m:
            if full:
                m.setattr(_input, "_plain_keys", lambda row: None)
                m.setattr(_input, "may_hold_key", lambda chunk, key: True)
            out = tmp_path / f"out_{full}.jsonl"
            opts = CollectOptions(default_agent="dflt")
            await collect_async(c, src, out, opts, Progress(None, stream=io.StringIO()))
            outs.append((out.read_bytes(), out.with_name(f"{out.stem}_aggregate_metrics.json").read_bytes()))
    assert outs[0] == outs[1]
    written = [orjson.loads(line) for line in outs[0][0].splitlines()]
    assert len(written) == len(rows)
    scored = sum(b"reward" in r or b"\\u0061" in r for r in rows)
    assert env.calls == 2 * (len(rows) - scored)  # two runs; scored lines never reach the server


def _many_chunks(tmp_path: Path) -> Path:
    """Scored, unscored and bad lines over many small chunks."""
    lines = []
    for i in range(300):
        row: dict[str, Any] = {"agent_ref": {"name": "ab"[i % 2]}, "_ng_task_index": i // 3, "_ng_rollout_index": i % 3}
        if i % 7 == 0:
            lines.append(b"{not json" if i % 49 == 0 else orjson.dumps({**row, "answer": "x"}))
        else:
            lines.append(orjson.dumps({**row, "reward": i % 2}))
    src = tmp_path / "many.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    return src


def _read(src: Path) -> list[Any]:
    out = []
    for item in read_input(src, None):
        out.append(("scored", item.text(), item.task.tolist()) if hasattr(item, "chunk") else vars(item))
    return out


def test_chunks_parsed_ahead_come_back_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _many_chunks(tmp_path)
    monkeypatch.setattr(_input, "CHUNK_BYTES", 700)  # about 8 lines a chunk
    ahead = _read(src)
    monkeypatch.setattr(_input, "READ_AHEAD", 0)
    assert _read(src) == ahead
    bad = [item["line"] for item in ahead if "field" in item and "line" in item]
    assert bad == [1 + i for i in range(300) if i % 49 == 0]
    # scored lines come back column-wise, or one by one from a chunk that does not parse whole
    scored = b"".join(item[1] for item in ahead if isinstance(item, tuple)).splitlines()
    scored += [item["raw"] for item in ahead if isinstance(item, dict) and item.get("verified")]
    assert sorted(scored) == sorted(line for i, line in enumerate(src.read_bytes().splitlines()) if i % 7)
    assert any(isinstance(item, tuple) for item in ahead)
    assert any(isinstance(item, dict) and item.get("verified") for item in ahead)


def test_a_reader_stopped_early_leaves_no_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    src = _many_chunks(tmp_path)
    monkeypatch.setattr(_input, "CHUNK_BYTES", 700)
    before = threading.active_count()
    items = read_input(src, None)
    next(items), next(items)
    items.close()  # as when collect stops at a bad line
    assert threading.active_count() == before


async def test_the_summary_counts_failed_rollouts(client: tuple[ResourcesClient, CountingEnv], tmp_path: Path) -> None:
    """"4 verified" read as four scored rollouts when verify failed on all of them: the summary
    says how many failed."""
    import contextlib

    from gym_metrics.cli._collect import report

    c, _ = client
    src = tmp_path / "in.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"agent_ref": {"name": "a"}, "answer": a, "expected": "x"}) + b"\n" for a in ("boom", "boom", "x")))
    result = await collect_async(c, src, tmp_path / "out.jsonl", CollectOptions(), Progress(None, stream=io.StringIO()))
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        report(result, 1.0)
    assert "3 verified, 0 already scored, 2 failed (rows with _gm_error, out of the score)" in printed.getvalue(), printed.getvalue()
