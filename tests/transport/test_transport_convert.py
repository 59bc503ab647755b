"""Proto <-> engine conversions: exact round trips and named validation errors (no gRPC)."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from gym_metrics._transport._batches import batch_to_columns, columns_to_batches
from gym_metrics._transport._convert import aggregate_to_metrics, metrics_to_aggregate
from gym_metrics.aggregate import AgentAggregate, AggregateOptions, Aggregator
from gym_metrics.rollouts import RolloutColumns, ValueKind, read_rollouts
from gym_metrics.aggregate.render._output import write_json
from gym_metrics.errors import InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

DATA = Path(__file__).parents[1] / "data"
ROLLOUT_FILES = sorted((DATA / "nemo_gym").glob("*.jsonl")) + sorted((DATA / "nemo_gym_extra").glob("*.jsonl"))


def _json(aggs: list[AgentAggregate]) -> bytes:
    buf = io.BytesIO()
    write_json(buf, aggs)
    return buf.getvalue()


def _over_the_wire(agg: AgentAggregate) -> AgentAggregate:
    wire = aggregate_to_metrics(agg).SerializeToString()
    return metrics_to_aggregate(pb.Metrics.FromString(wire), received_rollouts=agg.received_rollouts)


def _assert_round_trip(agg: AgentAggregate) -> None:
    before = _json([agg])
    after = _json([_over_the_wire(agg)])
    assert after == before


def _aggregate(cols: RolloutColumns, name: str = "agent", options: AggregateOptions | None = None, **hooks: Any) -> AgentAggregate:
    agg = Aggregator(name, options)
    agg.add(cols)
    return agg.finalize(**hooks)


# ----------------------------------------------------------------------------- metrics round trip


def test_rollout_files_exist() -> None:
    assert len([p for p in ROLLOUT_FILES if p.parent.name == "nemo_gym"]) >= 6


@pytest.mark.parametrize("path", ROLLOUT_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize(
    "options",
    [
        AggregateOptions(),
        AggregateOptions(include_rollout_infos=False, expected_rollouts_per_task=6, expected_task_indices=[0, 97, 98]),
    ],
    ids=["default", "expected-no-infos"],
)
def test_round_trip_is_byte_identical_on_rollout_files(path: Path, options: AggregateOptions) -> None:
    rollouts = read_rollouts(path)
    assert rollouts.agents
    for name, cols in rollouts.agents.items():
        _assert_round_trip(_aggregate(cols, name, options))


def test_round_trip_keeps_masking_coverage() -> None:
    cols = read_rollouts(DATA / "nemo_gym" / "masked.jsonl").agents["m"]
    assert cols.masked.any()
    agg = _aggregate(cols, "m")
    back = _over_the_wire(agg)
    assert back.agent_metrics["coverage/masked_rollouts"] == int(cols.masked.sum())
    assert isinstance(back.agent_metrics["coverage/masked_rollouts"], int)
    assert list(back.key_metrics) == list(agg.key_metrics)
    _assert_round_trip(agg)


def _rows_with_everything() -> list[dict[str, Any]]:
    rows = []
    for t in range(4):
        for r in range(3):
            row: dict[str, Any] = {
                "_ng_task_index": t,
                "_ng_rollout_index": r,
                "reward": float((t + r) % 2),
                "is_correct": bool((t + r) % 2),
                "num_tool_calls": t * r,
                "verdict": "ok",
                "a/b": 0.5 * r,  # a field name with a slash: stat keys must still split right
                "Zeta": 1.25,
            }
            if t == 1:
                row["latency"] = [math.nan, math.inf, 2.0][r]  # non-finite values are data
            if t == 2 and r == 1:
                del row["reward"]  # a missing field
                row["only_here"] = 7
            if t == 3 and r == 0:
                row["mask_sample"] = True
            rows.append(row)
    return rows


def _custom_metrics(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "per_task_metrics": [
            {"_ng_task_index": rows[0]["_ng_task_index"], "hard": i % 2 == 0, "notes": {"n": len(rows), "x": [1, 2.5]}}
            for i, rows in enumerate(tasks)
            if i != 1
        ],
        "custom_int": 3,
        "custom_np_float": np.float64(0.25),
        "custom_np_int": np.int64(9),
        "custom_bool": True,
        "custom_str": "text",
        "custom_nested": {"b": 1, "a": [1, 2]},
        "custom_nan": math.nan,
        "mean/reward": 123.0,  # compute_metrics wins on a clash
    }


def test_round_trip_with_custom_metrics_nan_inf_missing_and_masked() -> None:
    cols = RolloutColumns.from_rows(_rows_with_everything())
    agg = _aggregate(cols, compute_metrics=_custom_metrics)
    assert agg.non_finite_counts == {"latency": 2}
    assert agg.groups.custom is not None and agg.groups.custom[1] is None
    assert "coverage/masked_rollouts" in agg.agent_metrics
    _assert_round_trip(agg)

    m = aggregate_to_metrics(agg)
    assert m.agent_metrics["custom_int"] == 3.0
    assert m.agent_metrics["custom_np_int"] == 9.0
    assert m.agent_metrics["custom_bool"] == 1.0
    assert m.agent_metrics["mean/reward"] == 123.0
    assert "custom_str" not in m.agent_metrics and "custom_nested" not in m.agent_metrics
    assert math.isnan(m.agent_metrics["custom_nan"])
    assert dict(m.non_finite_counts) == {"latency": 2}
    back = metrics_to_aggregate(m)
    assert back.agent_metrics["custom_nested"] == {"b": 1, "a": [1, 2]}
    assert isinstance(back.agent_metrics["custom_int"], int)
    assert list(back.groups.stats) == list(agg.groups.stats)
    assert list(back.groups.stats)[:3] == ["mean/Zeta", "mean/a/b", "mean/is_correct"]
    assert [list(e) for e in back.repeat_level_metrics] == [list(e) for e in agg.repeat_level_metrics]
    assert back.groups.custom is not None and back.groups.custom[1] is None
    assert back.groups.custom[0] == {"hard": True, "notes": {"n": 3, "x": [1, 2.5]}}


def test_group_stats_keep_nan_as_absent() -> None:
    cols = RolloutColumns.from_rows(_rows_with_everything())
    agg = _aggregate(cols)
    m = aggregate_to_metrics(agg)
    latency_means = list(m.group_level_metrics.stats["mean/latency"].values)
    assert math.isnan(latency_means[0]) and latency_means[1] == 2.0  # only task 1 has a finite latency
    assert list(m.group_level_metrics.task_index) == [0, 1, 2, 3]
    infos = m.group_level_metrics.rollout_infos
    assert list(infos.values) and infos.values["only_here"].kind == pb.VALUE_KIND_INT
    assert len(infos.values["only_here"].missing) == len(infos.task_index) - 1
    assert infos.values["is_correct"].kind == pb.VALUE_KIND_BOOL


def test_round_trip_single_rollout_and_empty_aggregates() -> None:
    one = RolloutColumns.from_rows([{"_ng_task_index": 5, "_ng_rollout_index": 0, "reward": 1.0}])
    _assert_round_trip(_aggregate(one))
    empty = Aggregator("nobody").finalize()
    _assert_round_trip(empty)
    expected_only = Aggregator("waiting", AggregateOptions(expected_task_indices=[1, 2], expected_rollouts_per_task=4))
    _assert_round_trip(expected_only.finalize())


def test_round_trip_of_several_agents_together() -> None:
    rollouts = read_rollouts(DATA / "nemo_gym" / "multi_agent.jsonl")
    aggs = [_aggregate(cols, name) for name, cols in rollouts.agents.items()]
    assert len(aggs) == 3
    assert _json([_over_the_wire(a) for a in aggs]) == _json(aggs)


# ----------------------------------------------------------------------------- batches


def _batch(**kw: Any) -> pb.RolloutBatch:
    return pb.RolloutBatch(**kw)


def test_batch_to_columns_reads_packed_columns() -> None:
    batch = _batch(
        task_index=[0, 0, 1],
        rollout_index=[0, 1, 0],
        columns={
            "reward": pb.NumericColumn(values=[1.0, math.nan, math.inf], kind=pb.VALUE_KIND_FLOAT),
            "n": pb.NumericColumn(values=[3, 0, 4], missing=[1], kind=pb.VALUE_KIND_INT),
            "flag": pb.NumericColumn(values=[1, 0, 1], kind=pb.VALUE_KIND_BOOL),
            "plain": pb.NumericColumn(values=[1, 2, 3]),
        },
        masked=[False, True, False],
    )
    cols = batch_to_columns(batch, "batch[0]")
    assert cols.task_index.dtype == np.int64 and cols.task_index.tolist() == [0, 0, 1]
    assert cols.rollout_index.tolist() == [0, 1, 0]
    assert cols.masked.tolist() == [False, True, False]
    reward = cols.fields["reward"]
    assert reward.present.all() and reward.values[0] == 1.0 and math.isnan(reward.values[1]) and reward.values[2] == math.inf
    assert cols.fields["n"].present.tolist() == [True, False, True] and cols.fields["n"].kind is ValueKind.INT
    assert cols.fields["flag"].kind is ValueKind.BOOL
    assert cols.fields["plain"].kind is ValueKind.FLOAT
    assert cols.rows is None


def test_batch_to_columns_keeps_rows_lazily_and_adds_missing_indices() -> None:
    batch = _batch(
        task_index=[4],
        rollout_index=[2],
        columns={"reward": pb.NumericColumn(values=[1.0])},
        row_json=['{"reward": 1.0, "text": "hi"}'],
    )
    cols = batch_to_columns(batch, "batch[0]")
    assert cols.rows is not None and cols.rows.raw(0) == '{"reward": 1.0, "text": "hi"}'  # not parsed yet
    seen = []
    agg = Aggregator("a")
    agg.add(cols)
    agg.finalize(compute_metrics=lambda tasks: seen.extend(tasks) or {})
    assert seen == [[{"reward": 1.0, "text": "hi", "_ng_task_index": 4, "_ng_rollout_index": 2}]]


def test_batch_to_columns_derives_columns_from_rows() -> None:
    rows = [
        {"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 1.0, "ok": True, "n": 2, "mask_sample": True},
        {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": math.nan, "n": 3},
    ]
    batch = _batch(row_json=[orjson.dumps(r).decode() for r in rows])
    cols = batch_to_columns(batch, "batch[0]")
    assert cols.task_index.tolist() == [1, 0]
    assert cols.masked.tolist() == [True, False]
    assert cols.fields["ok"].kind is ValueKind.BOOL and cols.fields["ok"].present.tolist() == [True, False]
    assert cols.fields["n"].kind is ValueKind.INT
    assert cols.rows is not None and cols.rows[0]["ok"] is True


def test_columns_to_batches_round_trips_through_batch_to_columns() -> None:
    cols = RolloutColumns.from_rows(_rows_with_everything())
    batches = list(columns_to_batches(cols, 5, include_rows=True))
    assert [len(b.task_index) for b in batches] == [5, 5, 2]
    assert [b.batch_id for b in batches] == ["0", "1", "2"]
    back = [batch_to_columns(pb.RolloutBatch.FromString(b.SerializeToString()), f"batch[{i}]") for i, b in enumerate(batches)]
    assert np.concatenate([b.task_index for b in back]).tolist() == cols.task_index.tolist()
    assert np.concatenate([b.masked for b in back]).tolist() == cols.masked.tolist()
    for name, field in cols.fields.items():
        present = np.concatenate([b.fields[name].present if name in b.fields else np.zeros(len(b), bool) for b in back])
        assert present.tolist() == field.present.tolist(), name
        values = np.concatenate([b.fields[name].values if name in b.fields else np.full(len(b), np.nan) for b in back])
        np.testing.assert_array_equal(values[present], field.values[present])
        assert all(b.fields[name].kind is field.kind for b in back if name in b.fields)
    assert back[1].rows is not None and back[1].rows[0] == cols.rows[5]  # type: ignore[index]
    assert not list(columns_to_batches(cols, 5, include_rows=False))[0].row_json


def _violations(batch: pb.RolloutBatch, batch_no: int = 3) -> list[tuple[str, str, int | None]]:
    with pytest.raises(InvalidInputError) as info:
        batch_to_columns(batch, f"batch[{batch_no}]")
    return [(v.field, v.description, v.row) for v in info.value.violations]


def test_unequal_lengths_are_named() -> None:
    got = _violations(_batch(task_index=[0] * 6, rollout_index=[0] * 5))
    assert got == [("batch[3].rollout_index", "has 5 values, task_index has 6", None)]
    got = _violations(_batch(task_index=[0, 1], rollout_index=[0, 0], columns={"reward": pb.NumericColumn(values=[1.0])}))
    assert got == [("batch[3].columns[reward].values", "has 1 values, task_index has 2", None)]
    got = _violations(_batch(task_index=[0, 1], rollout_index=[0, 0], masked=[True]))
    assert got == [("batch[3].masked", "has 1 values, task_index has 2", None)]
    got = _violations(_batch(task_index=[0, 1], rollout_index=[0, 0], row_json=["{}"]))
    assert got == [("batch[3].row_json", "has 1 rows, task_index has 2", None)]


def test_negative_index_is_named_with_row() -> None:
    got = _violations(_batch(task_index=[0, 0, -1], rollout_index=[0, 1, 0]))
    assert got == [("batch[3].task_index", "must be >= 0, got -1", 2)]
    got = _violations(_batch(task_index=[0, 0], rollout_index=[-4, 1]))
    assert got == [("batch[3].rollout_index", "must be >= 0, got -4", 0)]


def test_missing_position_out_of_range() -> None:
    got = _violations(
        _batch(task_index=[0, 1], rollout_index=[0, 0], columns={"x": pb.NumericColumn(values=[1, 2], missing=[1, 7])})
    )
    assert got == [("batch[3].columns[x].missing", "position 7 is out of range for a batch of 2 rows", None)]


def test_bad_rows_are_named() -> None:
    got = _violations(_batch(task_index=[0, 1], rollout_index=[0, 0], columns={"x": pb.NumericColumn(values=[1, 2])}, row_json=["{}", "[1]"]))
    assert got == [("batch[3].row_json", "is not a JSON object", 1)]
    got = _violations(_batch(row_json=['{"_ng_task_index": 0, "_ng_rollout_index": 0}', '"text"']))
    assert got == [("batch[3].row_json", "is not a JSON object (got str)", 1)]
    got = _violations(_batch(row_json=['{"_ng_task_index": 1.5, "_ng_rollout_index": 0}']))
    assert got == [("batch[3].row_json[0]._ng_task_index", "must be an integer, got 1.5", None)]  # position, then the path inside
    got = _violations(_batch(row_json=['{"_ng_task_index": 0, "_ng_rollout_index": 0}', "{not json"]))
    assert got[0][0] == "batch[3].row_json" and got[0][2] == 1 and "not valid JSON" in got[0][1]


def test_indices_must_agree_with_row_json() -> None:
    batch = _batch(task_index=[0, 1], rollout_index=[0, 0], row_json=['{"_ng_task_index": 0}', '{"_ng_task_index": 2}'])
    got = _violations(batch)
    assert got == [("batch[3].task_index", "is 1 but row_json says 2", 1)]


def test_batches_with_big_rows_are_bounded_by_bytes_and_keep_every_row() -> None:
    rows = [{"_ng_task_index": i, "_ng_rollout_index": 0, "reward": 1.0, "pad": "x" * 1000} for i in range(100)]
    cols = RolloutColumns.from_rows(rows)
    batches = list(columns_to_batches(cols, batch_size=50, include_rows=True, id_prefix="p", max_row_bytes=10_000))
    assert all(sum(map(len, b.row_json)) <= 10_000 for b in batches)
    assert [b.batch_id for b in batches] == [f"p{k}" for k in range(len(batches))]
    assert [t for b in batches for t in b.task_index] == list(range(100))
    assert [orjson.loads(r)["_ng_task_index"] for b in batches for r in b.row_json] == list(range(100))
    assert all(len(b.columns["reward"].values) == len(b.task_index) for b in batches)
    assert len(batches) >= 10
