"""Unit tests of the aggregation engine (docs/metrics.md#aggregate-metrics), without gRPC."""

from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from gym_metrics.aggregate import AggregateOptions, Aggregator, iter_group_dicts, local_parts
from gym_metrics.rollouts import RolloutColumns, read_rollouts
from gym_metrics.aggregate.render._output import write_json
from gym_metrics.errors import InvalidInputError


def rows_for(rewards: list[list[float]], agent: str = "a", **extra: Any) -> list[dict[str, Any]]:
    return [
        {"agent_ref": {"name": agent}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": v, **extra}
        for t, task in enumerate(rewards)
        for r, v in enumerate(task)
    ]


def aggregate(rows: list[dict[str, Any]], options: AggregateOptions | None = None, **hooks: Any):
    agg = Aggregator("a", options)
    agg.add(RolloutColumns.from_rows(rows))
    return agg.finalize(**hooks)


def dump(result) -> bytes:
    buf = io.BytesIO()
    write_json(buf, [result])
    return buf.getvalue()


def test_worked_example_from_spec() -> None:
    res = aggregate(rows_for([[1, 1, 1, 1], [0, 0, 0, 0], [1, 1, 0, 0]]))
    m = res.agent_metrics
    assert m["mean/reward"] == 0.5
    assert m["std/reward"] == pytest.approx(0.5222329678670935, rel=1e-12)
    groups = list(iter_group_dicts(res.groups))
    assert [g["std/reward"] for g in groups] == [0.0, 0.0, pytest.approx(0.5773502691896257, rel=1e-12)]
    assert m["std_across_repeats/mean/reward"] == pytest.approx(0.19245008972987523, rel=1e-12)
    assert m["num_repeats"] == 4
    assert res.key_metrics == {"mean/reward": 0.5}


def test_result_independent_of_batch_order_and_size() -> None:
    rng = random.Random(7)
    rows = []
    for t in range(40):
        for r in range(rng.randint(1, 6)):
            row = {"_ng_task_index": t, "_ng_rollout_index": r, "reward": rng.random(), "ok": rng.random() < 0.5}
            if rng.random() < 0.2:
                del row["ok"]
            if rng.random() < 0.1:
                row["reward"] = float("nan")
            row["mask_sample"] = rng.random() < 0.1
            rows.append(row)
    expected = dump(aggregate(rows))
    for seed, size in [(1, 1), (2, 5), (3, 17), (4, 1000)]:
        shuffled = rows[:]
        random.Random(seed).shuffle(shuffled)
        agg = Aggregator("a")
        for i in range(0, len(shuffled), size):
            agg.add(RolloutColumns.from_rows(shuffled[i : i + size]))
        assert dump(agg.finalize()) == expected


def test_group_of_one_row_has_std_zero_only_for_fields_every_row_has() -> None:
    rows = [
        {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1.0, "x": 2},
        {"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0.0},
        {"_ng_task_index": 1, "_ng_rollout_index": 1, "reward": 1.0, "x": 5},
    ]
    g0, g1 = iter_group_dicts(aggregate(rows).groups)
    assert g0["std/reward"] == 0.0 and g0["std/x"] == 0.0
    # task 1 has a defined std for reward, so x (one value) gets no std at all
    assert g1["std/reward"] == pytest.approx(math.sqrt(0.5))
    assert "std/x" not in g1 and g1["mean/x"] == 5.0


def test_non_finite_values_are_left_out_and_counted() -> None:
    rows = rows_for([[1.0, float("inf"), 0.0], [float("nan"), 1.0, -float("inf")]])
    res = aggregate(rows)
    assert res.agent_metrics["mean/reward"] == pytest.approx(2 / 3)
    assert res.agent_metrics["max/reward"] == 1.0
    assert res.non_finite_counts == {"reward": 3}
    out = json.loads(dump(res))  # still valid JSON: non-finite rollout values become null
    infos = out[0]["group_level_metrics"][0]["rollout_infos"]
    assert [i["reward"] for i in infos] == [1.0, None, 0.0]


def test_masked_rows_leave_stats_and_report_coverage() -> None:
    rows = rows_for([[1, 0], [1, 1]])
    rows[1]["mask_sample"] = True
    rows[2]["mask_sample"] = True
    rows[3]["mask_sample"] = True
    res = aggregate(rows)
    assert res.agent_metrics["mean/reward"] == 1.0
    assert res.key_metrics["coverage/masked_rollouts"] == 3
    assert res.agent_metrics["coverage/fully_masked_tasks"] == 1
    assert res.agent_metrics["num_repeats"] == 2  # counted over all rows, masked included
    assert list(res.groups.task_index) == [0]


def test_duplicate_key_names_the_key() -> None:
    rows = rows_for([[1, 0]]) + rows_for([[1]])
    with pytest.raises(InvalidInputError, match=r"task 0, rollout 0"):
        aggregate(rows)


@pytest.mark.parametrize(
    "bad, field",
    [({"_ng_task_index": -1}, "_ng_task_index"), ({"_ng_rollout_index": 1.5}, "_ng_rollout_index"), ({"_ng_task_index": "3"}, "_ng_task_index")],
)
def test_bad_indices_are_named(bad: dict[str, Any], field: str) -> None:
    rows = rows_for([[1, 0]])
    rows[1].update(bad)
    with pytest.raises(InvalidInputError) as exc:
        aggregate(rows)
    assert exc.value.violations[0].field == field and exc.value.violations[0].row == 1


def test_expected_rollouts_make_completion_honest() -> None:
    rows = rows_for([[1, 0, 1], [1]])
    res = aggregate(rows, AggregateOptions(expected_rollouts_per_task=3, expected_task_indices=[0, 1, 5]))
    groups = list(iter_group_dicts(res.groups))
    assert [g["_ng_task_index"] for g in groups] == [0, 1, 5]
    assert [g["missing_num_rollouts"] for g in groups] == [0, 2, 3]
    assert groups[1]["reward_profile_completion_pct"] == pytest.approx(100 / 3)
    assert groups[2]["num_rollouts"] == 0 and "mean/reward" not in groups[2]


def test_compute_metrics_sees_unmasked_full_rows_in_order_and_per_task_merges() -> None:
    rows = rows_for([[1, 0], [0, 1]], note="kept")
    rows[1]["mask_sample"] = True
    random.Random(0).shuffle(rows)
    seen: list[list[tuple[int, int, str]]] = []

    def compute(tasks: list[list[dict[str, Any]]]) -> dict[str, Any]:
        seen.extend([[(r["_ng_task_index"], r["_ng_rollout_index"], r["note"]) for r in task] for task in tasks])
        return {"mean/reward": -1, "solved": 1, "per_task_metrics": [{"_ng_task_index": 1, "hard": True}]}

    res = aggregate(rows, compute_metrics=compute)
    assert seen == [[(0, 0, "kept")], [(1, 0, "kept"), (1, 1, "kept")]]
    assert res.agent_metrics["mean/reward"] == -1  # compute_metrics wins on a clash
    assert list(res.agent_metrics)[-1] == "num_repeats"
    groups = list(iter_group_dicts(res.groups))
    assert "hard" not in groups[0] and groups[1]["hard"] is True
    assert groups[0]["sample"]["note"] == "kept" and "_ng_task_index" not in groups[0]["sample"]


def test_repeat_level_only_with_two_rollout_indices() -> None:
    assert aggregate(rows_for([[1], [0]])).repeat_level_metrics == []
    rl = aggregate(rows_for([[1, 0], [0]])).repeat_level_metrics
    assert [e["_ng_rollout_index"] for e in rl] == [0, 1]
    assert rl[1]["sample_count"] == 1 and rl[1]["missing_count"] == 1
    assert rl[1]["std/reward"] == 0.0 and "ci_low_95/reward" not in rl[1]


def test_usage_fields_and_bools_count(tmp_path: Path) -> None:
    rows = [
        {"agent_ref": {"name": "u"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": True, "ok": False,
         "response": {"usage": {"input_tokens": 10, "output_tokens": 3}, "id": "x"}, "nested": {"z": 1}},
        {"agent_ref": {"name": "u"}, "_ng_task_index": 0, "_ng_rollout_index": 1, "reward": 0.5, "ok": True},
    ]
    res = aggregate(rows)
    m = res.agent_metrics
    assert m["mean/reward"] == 0.75 and m["mean/ok"] == 0.5 and m["mean/input_tokens"] == 10
    assert not any("nested" in k or "_ng" in k for k in m)


# ----- reading files -----


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_nan_literal_and_blank_lines_are_read(tmp_path: Path) -> None:
    p = write_lines(
        tmp_path / "r.jsonl",
        [
            '{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": NaN}',
            "",
            '{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 1, "reward": 1.0}',
        ],
    )
    cols = read_rollouts(p).agents["a"]
    assert np.isnan(cols.fields["reward"].values[0]) and cols.fields["reward"].present[0]
    assert list(cols.row_labels) == [1, 3]


@pytest.mark.parametrize("rows", [3, 3000], ids=["line by line", "column-wise"])
def test_a_whitespace_line_of_any_length_is_blank(tmp_path: Path, rows: int) -> None:
    """Blank lines of 4 bytes or more were bad lines for aggregate (only shorter ones were
    looked at), while collect and evaluate skip them, as NeMo Gym does."""
    lines = []
    for i in range(rows):
        lines.append(f'{{"agent_ref": {{"name": "a"}}, "_ng_task_index": {i}, "_ng_rollout_index": 0, "reward": 1.0}}')
        if i % 1000 == 0:
            lines += ["  \t ", " " * 40, "\r"]
    read = read_rollouts(write_lines(tmp_path / "r.jsonl", lines))
    assert not read.bad_lines and len(read.agents["a"].task_index) == rows
    assert read.agents["a"].row_labels[1] == 5


def test_bad_lines_are_named_with_line_numbers(tmp_path: Path) -> None:
    p = write_lines(
        tmp_path / "r.jsonl",
        [
            '{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1}',
            "{not json",
            '{"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 1}',
            '{"agent_ref": {"name": "a"}, "_ng_task_index": -2, "_ng_rollout_index": 0}',
            '[1, 2]',
        ],
    )
    with pytest.raises(InvalidInputError) as exc:
        read_rollouts(p)
    got = [(v.row, v.field) for v in exc.value.violations]
    assert got == [(2, "json"), (3, "agent_ref.name"), (4, "_ng_task_index"), (5, "row")]
    skipped = read_rollouts(p, on_bad_line="skip")
    assert [b.line for b in skipped.bad_lines] == [2, 3, 4, 5]
    assert len(skipped.agents["a"]) == 1


def test_fast_and_line_by_line_readers_agree(tmp_path: Path) -> None:
    """A file the columnar reader accepts, and the same rows plus one NaN line that forces the
    per-line reader, give identical stats for the common rows."""
    rng = random.Random(3)
    lines = []
    for t in range(30):
        for r in range(4):
            row = {"agent_ref": {"name": "ab"[t % 2]}, "_ng_task_index": t, "_ng_rollout_index": r,
                   "reward": float(rng.random() < 0.5), "lat": round(rng.random(), 4), "n": rng.randint(0, 3),
                   "flag": rng.random() < 0.5, "s": "text", "response": {"usage": {"input_tokens": rng.randint(1, 9)}}}
            if rng.random() < 0.2:
                del row["lat"]
            lines.append(json.dumps(row))
    fast = tmp_path / "fast.jsonl"
    write_lines(fast, lines)
    slow = tmp_path / "slow.jsonl"
    write_lines(slow, lines + ['{"agent_ref": {"name": "zz"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "reward": NaN}'])
    a, b = read_rollouts(fast), read_rollouts(slow)
    for name in ("a", "b"):
        ra = Aggregator(name)
        ra.add(a.agents[name])
        rb = Aggregator(name)
        rb.add(b.agents[name])
        assert dump(ra.finalize()) == dump(rb.finalize())


def test_type_change_in_a_column_is_read_exactly(tmp_path: Path) -> None:
    p = write_lines(
        tmp_path / "r.jsonl",
        [
            '{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": 0, "score": "high"}',
            '{"agent_ref": {"name": "a"}, "_ng_task_index": 1, "_ng_rollout_index": 0, "score": 3}',
        ],
    )
    cols = read_rollouts(p).agents["a"]
    assert list(cols.fields["score"].present) == [False, True]
    assert cols.fields["score"].values[1] == 3.0


def test_values_near_the_float_limit_never_write_inf_or_null() -> None:
    rows = [
        {"_ng_task_index": 0, "_ng_rollout_index": 0, "x": 1e308},
        {"_ng_task_index": 0, "_ng_rollout_index": 1, "x": 1.7e308},
        {"_ng_task_index": 1, "_ng_rollout_index": 0, "x": -1e308},
    ]
    res = aggregate(rows)
    m = res.agent_metrics
    assert m["mean/x"] == pytest.approx(1.7e308 / 3) and m["std/x"] == pytest.approx(1.4011899704655802e308)
    assert all(math.isfinite(v) for v in m.values())
    assert "ci_low_95_across_repeats/mean/x" not in m  # the interval itself overflows: omitted
    assert json.loads(dump(res))[0]["group_level_metrics"][0]["median/x"] == pytest.approx(1.35e308)


def test_failed_rollouts_are_counted_and_left_out_or_scored_zero() -> None:
    rows = rows_for([[1, 1], [1, 0]], difficulty=3)
    for r in (rows[1], rows[2]):
        del r["reward"]
    rows[1]["_gm_error"] = {"kind": "verify_failed", "message": "boom"}
    rows[2]["_gm_error"] = {"kind": "timeout", "message": "slow"}
    rows.append({"_ng_task_index": 2, "_ng_rollout_index": 0, "_gm_error": {"kind": "verify_failed"}, "difficulty": 3})
    left_out = aggregate(rows)
    assert left_out.agent_metrics["mean/reward"] == 0.5  # rewards 1 (task 0) and 0 (task 1)
    assert left_out.key_metrics["errors/total"] == 3
    assert left_out.agent_metrics["errors/verify_failed"] == 2 and left_out.agent_metrics["errors/timeout"] == 1
    groups = list(iter_group_dicts(left_out.groups))
    assert [(g["_ng_task_index"], g["num_rollouts"], g["missing_num_rollouts"]) for g in groups] == [
        (0, 1, 1), (1, 1, 1), (2, 0, 1)]  # the task whose only rollout failed still appears
    as_zero = aggregate(rows, AggregateOptions(count_errors_as_zero=True))
    assert as_zero.agent_metrics["mean/reward"] == pytest.approx(1 / 5)
    assert as_zero.agent_metrics["errors/total"] == 3 and as_zero.agent_metrics["num_repeats"] == 2


@pytest.mark.parametrize("as_zero", [False, True])
def test_rollout_infos_and_samples_rebuilt_by_a_client_match_the_engines(as_zero: bool) -> None:
    rows = rows_for([[1, 0, 1], [0, 1], [1]], extra=2)
    rows[0]["mask_sample"] = True
    rows[3].pop("reward")
    rows[3]["_gm_error"] = {"kind": "verify_failed"}
    rows[4]["only_here"] = 7
    cols = RolloutColumns.from_rows(rows)
    opts = dict(count_errors_as_zero=as_zero, expected_task_indices=[0, 1, 2, 3])
    full = Aggregator("a", AggregateOptions(**opts))
    full.add(cols)
    lean = Aggregator("a", AggregateOptions(include_rollout_infos=False, include_samples=False, **opts))
    lean.add(cols)
    rebuilt = lean.finalize()
    assert rebuilt.groups.rollout_infos is None and all(s is None for s in rebuilt.groups.samples)
    local_parts([cols], as_zero).attach(rebuilt)
    assert dump(rebuilt) == dump(full.finalize())


def test_fast_group_rendering_equals_the_dict_path() -> None:
    """The column-wise JSON writer and the plain-dict path give the same entries, including
    tasks with no rollouts, non-finite values and fields some rollouts lack."""
    from gym_metrics.aggregate.render._output import iter_group_json

    rng = random.Random(5)
    rows = []
    for t in range(60):
        for r in range(rng.randint(1, 5)):
            row = {"_ng_task_index": t, "_ng_rollout_index": r, "reward": float(rng.random() < 0.5),
                   "n": rng.randint(0, 9), "ok": rng.random() < 0.5, "lat": rng.random()}
            if t == 7:
                row["lat"] = float("inf")
            if t == 9 and r == 0:
                del row["n"]
            rows.append(row)
    res = aggregate(rows, AggregateOptions(expected_task_indices=[100, 101]))
    dicts = list(iter_group_dicts(res.groups))
    rendered = json.loads(b"[" + b",".join(iter_group_json(res.groups)) + b"]")
    assert rendered == json.loads(json.dumps(dicts).replace("Infinity", "null"))
    assert [g["_ng_task_index"] for g in rendered][-2:] == [100, 101] and rendered[-1]["rollout_infos"] == []


@pytest.mark.parametrize("with_infos", [True, False])
def test_column_wise_heads_equal_the_dict_path_on_plain_data(with_infos: bool) -> None:
    from gym_metrics.aggregate.render._output import _entries, _head_parts, _heads, iter_group_json

    rng = random.Random(11)
    rows = [
        {"_ng_task_index": t, "_ng_rollout_index": r, "reward": float(rng.random() < 0.5), "n": rng.randint(0, 9),
         "x%y": rng.random()}
        for t in range(50)
        for r in range(3)
    ]
    res = aggregate(rows, AggregateOptions(include_rollout_infos=with_infos, expected_rollouts_per_task=4))
    head = _head_parts(res.groups, 0, len(res.groups))
    assert head is not None  # the column-wise path is taken here
    heads = _heads(res.groups, 0, len(res.groups), head)
    assert heads == [orjson.dumps(e)[:-1] for e in _entries(res.groups, 0, len(res.groups))]
    rendered = json.loads(b"[" + b",".join(iter_group_json(res.groups)) + b"]")
    assert rendered == list(iter_group_dicts(res.groups))


def test_per_task_metrics_merge_past_one_slice_of_tasks() -> None:
    """compute_metrics' per_task_metrics land on their own task's group beyond the first 65,536
    tasks too (positions are found a slice at a time)."""
    import numpy as np

    from gym_metrics.aggregate._groups import merge_per_task
    from gym_metrics.aggregate._tables import GroupTable

    n = 70_000
    tasks = np.arange(n, dtype=np.int64) * 2
    groups = GroupTable(tasks, {}, np.ones(n, dtype=np.int64), np.ones(n, dtype=np.int64), [None] * n)
    merge_per_task(groups, [{"_ng_task_index": 2 * i, "score": i} for i in range(n - 1, -1, -7)] + [{"_ng_task_index": 3, "score": -1}])
    assert groups.custom is not None
    assert groups.custom[n - 1] == {"score": n - 1} and groups.custom[n - 8] == {"score": n - 8}
    assert groups.custom[n - 2] is None and sum(c is not None for c in groups.custom) == len(range(n - 1, -1, -7))
