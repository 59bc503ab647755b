"""Rows the reader accepts but that orjson or a gRPC message cannot carry. An integer beyond 64
bits (a dataset id) or nesting past orjson's 254 levels crashed collect with an internal error
(exit 1), naming no line; now such a row is sent and written as Python's json writes it, the
integer exact. A row larger than one verify message stopped the whole run with the transport's
RESOURCE_EXHAUSTED, naming no line, and `--resume` met it again forever; now it is a bad line
naming its line and size (`--on-bad-line skip` leaves it out, the other rows verified)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gym_metrics import ResourcesClient
from gym_metrics.collector import CollectOptions, collect_async
from gym_metrics.errors import InvalidInputError
from gym_metrics.testing import serve_environment
from gym_metrics_servers.math_exact import SAMPLE_PATH

pytestmark = pytest.mark.timeout(60)
BIG = 2**70


def _rows(n: int) -> list[dict[str, object]]:
    return [json.loads(line) for line in SAMPLE_PATH.read_text().splitlines()[:n]]


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


async def test_an_integer_past_64_bits_and_deep_nesting_are_sent_and_written_exactly(tmp_path: Path) -> None:
    rows = _rows(4)
    rows[1]["id"] = BIG
    rows[2]["deep"] = json.loads("[" * 260 + "]" * 260)
    scored = {"agent_ref": None, "_ng_task_index": 9, "_ng_rollout_index": 0, "reward": 1.0, "id": BIG}  # rewritten to name --agent
    async with serve_environment("math_exact") as running, ResourcesClient(running.address) as client:
        await collect_async(client, _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl", CollectOptions())
        await collect_async(client, _write(tmp_path / "scored.jsonl", [scored]), tmp_path / "scored_out.jsonl", CollectOptions(default_agent="X"))
    out = {r["_ng_rollout_index"]: r for r in map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())}
    assert len(out) == 4 and "_gm_error" not in out[1] and out[1]["reward"] == 1.0  # sent with its id exact, verified
    assert "nesting" in out[2]["_gm_error"]["message"]  # the server's parser says how deep it goes: that row's error only
    [written] = [json.loads(line) for line in (tmp_path / "scored_out.jsonl").read_text().splitlines()]
    assert written["id"] == BIG and written["agent_ref"] == {"name": "X"}


async def test_a_row_no_message_carries_is_a_bad_line_naming_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gym_metrics.collector import _router

    monkeypatch.setattr(_router, "MAX_BODY_BYTES", 1 << 20)  # (a 1 MiB message: the same rule as gRPC's 64 MiB, cheaper to meet)
    rows = _rows(6)
    rows[2]["pad"] = "x" * (2 << 20)
    src = _write(tmp_path / "in.jsonl", rows)
    async with serve_environment("math_exact") as running, ResourcesClient(running.address) as client:
        with pytest.raises(InvalidInputError) as refused:
            await collect_async(client, src, tmp_path / "out.jsonl", CollectOptions())
        [violation] = refused.value.violations
        assert violation.row == 3 and "2.0 MB of JSON" in violation.description and "--on-bad-line skip" in violation.description
        result = await collect_async(client, src, tmp_path / "out.jsonl", CollectOptions(resume=True, on_bad_line="skip"))
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert len(out) == 5 and all("pad" not in r for r in out) and len(result.bad_lines) == 1


def test_an_output_in_use_is_refused_through_a_symlink_too(tmp_path: Path) -> None:
    """The lock of one collect per output was taken by the path as given: a second collect on a
    symlink to the output ran beside the first, writing rows twice."""
    from gym_metrics.collector._shard import output_locked
    from gym_metrics.errors import GymMetricsError

    out = tmp_path / "out.jsonl"
    out.write_text("")
    (tmp_path / "other").mkdir()
    link = tmp_path / "other" / "out.jsonl"
    link.symlink_to(out)
    with output_locked(out):
        with pytest.raises(GymMetricsError, match="another collect is running"):
            with output_locked(link):
                pass


async def test_a_line_nested_past_the_readers_stack_is_a_bad_line(tmp_path: Path) -> None:
    """A valid row nested 100,000 deep (scored, so read column-wise first) ended collect with a
    segmentation fault inside pyarrow's reader; it is a bad line naming its line, and
    `--on-bad-line skip` runs the others."""
    rows = _rows(3)
    scored = [{"agent_ref": {"name": "A"}, "_ng_task_index": 7 + i, "_ng_rollout_index": 0, "reward": 1.0} for i in range(2)]
    src = tmp_path / "in.jsonl"
    deep = json.dumps(scored[1])[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    src.write_text("".join(json.dumps(r) + "\n" for r in [*rows, scored[0]]) + deep + "\n")
    async with serve_environment("math_exact") as running, ResourcesClient(running.address) as client:
        with pytest.raises(InvalidInputError) as refused:
            await collect_async(client, src, tmp_path / "out.jsonl", CollectOptions())
        assert "line 5" in str(refused.value) and "nested too deeply" in str(refused.value)
        await collect_async(client, src, tmp_path / "skipped.jsonl", CollectOptions(on_bad_line="skip"))
    assert len((tmp_path / "skipped.jsonl").read_text().splitlines()) == 4
