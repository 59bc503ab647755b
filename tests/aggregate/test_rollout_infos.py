"""rollout_infos value for value as nemo-gym 0.7.0 writes them (issue 10, points 1 and 2): the raw
`reward`, only finite numbers and bools elsewhere, ints as ints, a row's own top-level number
beside `response.usage`'s; the same whichever reader read the file, and across the wire."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gym_metrics._transport._batches import batch_to_columns, columns_to_batches
from gym_metrics.aggregate import Aggregator, aggregate_file, iter_group_dicts
from gym_metrics.rollouts import _reader
from gym_metrics.rollouts import RolloutColumns
from gym_metrics.rollouts import concat
from gym_metrics.errors import InvalidInputError


def infos_of(cols: RolloutColumns) -> list[dict[str, Any]]:
    agg = Aggregator("a")
    agg.add(cols)
    return [info for group in iter_group_dicts(agg.finalize().groups) for info in group["rollout_infos"]]


def row(r: int, **fields: Any) -> dict[str, Any]:
    return {"_ng_task_index": 0, "_ng_rollout_index": r, **fields}


def strip(info: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in info.items() if k not in ("rollout_id", "_ng_task_index", "_ng_rollout_index")}


def test_reward_as_the_row_holds_it_and_other_fields_only_when_finite() -> None:
    rows = [
        row(0, reward="1.0", score=float("nan")),
        row(1, reward=None, score=None, n=3),
        row(2, reward=float("nan"), score=0.5, n=float("nan")),
        row(3, reward=float("inf"), score=float("-inf"), n=4),
        row(4, reward=True, ok=True),
        row(5, reward={"a": 1}, ok=False),
        row(6, reward=[1, 0]),
        row(7, score=2),
        row(8, reward=1, score=2.0),
    ]
    got = [strip(i) for i in infos_of(RolloutColumns.from_rows(rows))]
    assert got == [
        {"reward": "1.0"},
        {"reward": None, "n": 3},
        {"reward": None, "score": 0.5},
        {"reward": None, "n": 4},
        {"reward": True, "ok": 1},
        {"reward": {"a": 1}, "ok": 0},
        {"reward": [1, 0]},
        {"score": 2},
        {"reward": 1, "score": 2.0},
    ]
    assert [type(i.get("score")) for i in got[7:]] == [int, float]  # each value as its row typed it


def test_top_level_number_beside_usage_is_shown_and_usage_is_counted() -> None:
    """aalcr rows: `input_tokens` is the documents' size at top level and what the model read
    in usage; nemo-gym's rollout_infos show the first, its stats the second."""
    usage = {"input_tokens": 112938, "output_tokens": 221, "total_tokens": 113159}
    rows = [
        row(0, reward=1.0, input_tokens=106804, response={"usage": usage}),
        row(1, reward=0.0, input_tokens=90000, response={"usage": {**usage, "input_tokens": None}}),
        row(2, reward=0.0, input_tokens=None, response={"usage": {**usage, "input_tokens": 5}}),
        row(3, reward=0.5, response={"usage": {"reward": 0.25, "input_tokens": 7}}),
    ]
    cols = RolloutColumns.from_rows(rows)
    got = [strip(i) for i in infos_of(cols)]
    assert [(i["input_tokens"], i["reward"]) for i in got] == [(106804, 1.0), (90000, 0.0), (5, 0.0), (7, 0.25)]
    agg = Aggregator("a")
    agg.add(cols)
    result = agg.finalize()
    assert result.agent_metrics["mean/input_tokens"] == pytest.approx((112938 + 5 + 7) / 3)
    assert result.agent_metrics["mean/reward"] == pytest.approx((1.0 + 0.0 + 0.0 + 0.25) / 4)


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_infos(path: Path, tmp_path: Path) -> list[dict[str, Any]]:
    out, _, _ = aggregate_file(path, tmp_path / "out.json")
    return [i for g in json.loads(out.read_text())[0]["group_level_metrics"] for i in g["rollout_infos"]]


@pytest.mark.parametrize("chunk_bytes", [1 << 24, 600])
def test_ints_beside_floats_whichever_reader_and_chunking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    """pyarrow reads `4` beside `4.5` as 4.0: the reader must notice. With small chunks the file
    is read in parts typed differently (one all ints, one all floats) and joined."""
    monkeypatch.setattr(_reader, "CHUNK_BYTES", chunk_bytes)
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": 0, "reward": t if t < 6 else t + 0.5,
             "steps": float(t), "big": 2**53 + 1 + t} for t in range(12)]  # fmt: skip
    expected = [(r["reward"], r["steps"], r["big"]) for r in rows]
    fast = read_infos(write(tmp_path / "r.jsonl", rows), tmp_path)
    monkeypatch.setattr(_reader, "_read_fast", lambda *args: None)
    slow = read_infos(tmp_path / "r.jsonl", tmp_path)
    for got in (fast, slow):
        shown = [(i["reward"], i["steps"], i["big"]) for i in got]
        assert shown == expected and [type(x[0]) for x in shown] == [type(x[0]) for x in expected]


def test_a_field_name_the_text_search_cannot_spell_goes_line_by_line(tmp_path: Path) -> None:
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": r, "sc\u00f6re": [1, 1.5][r]} for r in range(2)]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=True) + "\n" for r in rows))  # the key escaped in the file
    assert [(i["sc\u00f6re"], type(i["sc\u00f6re"])) for i in read_infos(path, tmp_path)] == [(1, int), (1.5, float)]


def test_reward_null_is_told_from_no_reward_by_the_fast_reader(tmp_path: Path) -> None:
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": r, "x": r} for r in range(3)]
    rows[0]["reward"], rows[2]["reward"] = 1.0, None
    assert [i.get("reward", "absent") for i in read_infos(write(tmp_path / "r.jsonl", rows), tmp_path)] == [1.0, "absent", None]


def test_shown_columns_cross_the_wire_and_bad_positions_are_named() -> None:
    rows = [row(r, reward=[None, "x", 1, 0.5][r], n=[1, 1.5, None, 2][r], response={"usage": {"n": 9}}) for r in range(4)]
    cols = RolloutColumns.from_rows(rows, keep_rows=False)
    assert cols.shown
    batches = list(columns_to_batches(cols, 3, include_rows=False))
    back = concat([batch_to_columns(b, f"batch[{i}]") for i, b in enumerate(batches)])
    assert infos_of(back) == infos_of(cols)
    bad = batches[0]
    bad.shown["n"].ints.append(7)
    with pytest.raises(InvalidInputError) as exc:
        batch_to_columns(bad, "batch[0]")
    assert exc.value.violations[0].field == "batch[0].shown[n].ints"


def test_a_failed_rollout_counted_as_zero_shows_zero() -> None:
    rows = [row(0, reward="1.0"), {**row(1), "_gm_error": {"kind": "verify_failed"}}]
    from gym_metrics.aggregate import AggregateOptions

    agg = Aggregator("a", AggregateOptions(count_errors_as_zero=True))
    agg.add(RolloutColumns.from_rows(rows))
    infos = [i for g in iter_group_dicts(agg.finalize().groups) for i in g["rollout_infos"]]
    assert [i["reward"] for i in infos] == ["1.0", 0.0]
    assert not math.isnan(np.float64(infos[1]["reward"]))
