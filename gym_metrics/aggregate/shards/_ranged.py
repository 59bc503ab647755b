"""The merge's engine (docs/pipelines.md#sharded-aggregation): the metrics of merged partials,
byte for byte those of the one-process engine (_engine), in little more memory than the rows'
columns.

The one-process engine works on whole columns: a sorted copy of every column, per field a
group level over every row (its temporaries and a table of every task's stats), a reordered
copy for the repeat level. Here the columns are reordered in place one at a time, the
group level's sums are made a range of tasks at a time (_ranged_stats) and its stats and
text when each range is written (_ranged_render), the agent level one field at a time
with its sums carried slice by slice, the repeat level one repeat at a time. Every sum is
the one the engine makes, in the same order (see _ranged_stats).

For callers with a `compute_metrics` or `compute_metrics_columns` hook (they see every row
and may change the groups) the merge uses the one-process engine instead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gym_metrics._util.memory import trim_heap
from gym_metrics._util.unique import unique
from gym_metrics.aggregate._hooks import called
from gym_metrics.aggregate._accounting import (
    apply_errors,
    coverage_counts,
    error_counts,
    failed_by_task,
    masked_by_task,
    non_numeric_counts_of,
)
from gym_metrics.rollouts import NumericField, RolloutColumns, take_non_numeric, take_shown
from gym_metrics.aggregate._engine import (
    AggregateOptions,
    ColumnMetrics,
    GetKeyMetrics,
    _measured_shown,
    default_key_metrics,
    with_expected_tasks,
)
from gym_metrics.aggregate._groups import stat_columns
from gym_metrics.aggregate.render._output import write_aggregate_metrics
from gym_metrics.aggregate.shards import _ranged_render
from gym_metrics.aggregate.shards._ranged_render import GroupSource, RangedRender
from gym_metrics.aggregate.shards._ranged_stats import Tasks, repeat_level, task_spread, whole_stats
from gym_metrics.rollouts import RolloutFile
from gym_metrics.aggregate._repeats import across_repeats
from gym_metrics.aggregate._stats import GroupedStats, group_starts
from gym_metrics.aggregate._tables import AgentAggregate, GroupTable
from gym_metrics.aggregate._uncertainty import FieldSpread, is_binary, uncertainty_metrics


Extra = Callable[[str, RolloutColumns], Mapping[str, Any]]
"""aggregate_rollouts' `extra`: sections of an agent's entry from its rows sorted by key."""


def aggregate_ranged(
    rollouts: RolloutFile,
    out: Path,
    *,
    options: AggregateOptions | None = None,
    get_key_metrics: GetKeyMetrics | None = None,
    extra: Extra | None = None,
    column_metrics: ColumnMetrics | None = None,
) -> list[AgentAggregate]:
    """`aggregate_rollouts` without the row hooks, consuming the rows: each agent's columns
    leave `rollouts.agents` as they are aggregated (they are reordered in place)."""
    options = options or AggregateOptions()
    results = []
    sections: dict[str, dict[str, Any]] = {}
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in sorted(rollouts.agents):  # no reference to an agent's rows is kept here: _agent frees them
        section = {} if extra is None else sections.setdefault(name, {})
        results.append(_agent(name, _sorted(rollouts.agents.pop(name)), options, get_key_metrics, column_metrics, extra,
                              section, out.parent))  # fmt: skip
    write_aggregate_metrics(out, results, sections or None)
    return results


def _sorted(data: RolloutColumns) -> RolloutColumns:
    """_engine._sorted_unique, reordering the columns in place one at a time."""
    order, dup = data.key_order()
    if order is None:
        return data
    if len(dup):
        raise data.duplicate_keys_error(order, dup)
    _take_in_place(data, order)
    return data


def _take_in_place(data: RolloutColumns, idx: np.ndarray) -> None:
    """`data.take(idx)` into `data` itself: each column's old copy is freed before the next
    column is taken, so at most one column is held twice."""
    data.task_index = data.task_index[idx]
    data.rollout_index = data.rollout_index[idx]
    data.masked = data.masked[idx]
    for name in list(data.fields):
        data.fields[name] = data.fields[name].take(idx)
    data.rows = data.rows.take(idx) if data.rows is not None else None
    data.row_labels = data.row_labels[idx] if data.row_labels is not None else None
    data.errors = data.errors[idx] if data.errors is not None else None
    data.non_numeric = take_non_numeric(data.non_numeric, idx)
    data.shown = take_shown(data.shown, idx)


@dataclass
class _Counts:
    """What the engine counts over every row of an agent, before the measured rows remain."""

    received: int
    num_repeats: int
    errors: dict[str, int]
    failed_per_task: dict[int, int]
    coverage: dict[str, int]
    masked_per_task: dict[int, int]
    non_numeric: dict[str, int]
    shown: dict[str, Any]


def _agent(
    name: str, data: RolloutColumns, options: AggregateOptions, get_key_metrics: GetKeyMetrics | None,
    column_metrics: ColumnMetrics | None, extra: Extra | None, section: dict[str, Any], tmp_dir: Path,
) -> AgentAggregate:  # fmt: skip
    """_engine._aggregate's stages and output, in the same order (`extra`'s answer into `section`)."""
    if extra is not None:
        section.update(extra(name, _wide(data)))
    cols, counts = _measured(data, options)
    del data
    source, spreads = _groups(cols, counts, options)
    render = RangedRender(source, tmp_dir)  # forks the render workers: they start on the groups now
    agent_metrics, repeats = _agent_level(cols, source.names, source.valid, spreads, len(source.measured))
    agent_metrics.update(counts.coverage)
    agent_metrics.update(counts.errors)
    if len(cols):
        if column_metrics is not None:
            agent_metrics.update(called("column_metrics", column_metrics, _wide(cols, measured_only=True)))
        agent_metrics["num_repeats"] = counts.num_repeats
        key_metrics = dict(called("get_key_metrics", get_key_metrics or default_key_metrics, agent_metrics))
    else:
        key_metrics = {}
    key_metrics.update(counts.coverage)
    key_metrics.update(counts.errors)
    non_finite = {k: int((cols.fields[k].present & ~source.valid[k]).sum()) for k in source.names}
    return AgentAggregate(
        agent_name=name, agent_metrics=agent_metrics, key_metrics=key_metrics, groups=source.groups,
        repeat_level_metrics=repeats, non_finite_counts={k: v for k, v in non_finite.items() if v},
        received_rollouts=counts.received, non_numeric_counts=counts.non_numeric, prerender=render,
    )  # fmt: skip


def _measured(data: RolloutColumns, options: AggregateOptions) -> tuple[RolloutColumns, _Counts]:
    """The counts over every row, then `data` itself reduced to the measured rows (failed rows
    as apply_errors says, masked rows out), in place."""
    received, num_repeats = len(data), len(_distinct(data.rollout_index))
    errors = error_counts(data)
    failed_per_task = failed_by_task(data) if not options.count_errors_as_zero else {}
    if options.count_errors_as_zero or data.errors is None or not data.errors.any():
        data = apply_errors(data, options.count_errors_as_zero)
    else:  # apply_errors' take, in place
        _take_in_place(data, np.flatnonzero(data.errors == 0))
        data.errors = None
    if data.non_numeric:  # only numeric fields' flags are ever counted (non_numeric_counts_of):
        # the text-only keys' (10 MB each at 10M rollouts) go now
        data.non_numeric = {k: v for k, v in data.non_numeric.items() if k in data.fields} or None
    coverage, masked_per_task, non_numeric, shown = _accounting(data)
    counts = _Counts(received, num_repeats, errors, failed_per_task, coverage, masked_per_task, non_numeric, shown)
    return data, counts


def _groups(cols: RolloutColumns, counts: _Counts, options: AggregateOptions) -> tuple[GroupSource, dict[str, FieldSpread]]:
    """The groups to render (their tasks and counts, expected and failed tasks included) and
    each field's spread over tasks, from per-task sums made a range of tasks at a time."""
    names = sorted(k for k, v in cols.fields.items() if v.present.any())
    valid = _valid(cols, names)
    starts = group_starts(cols.task_index)
    sample_rows = cols.rows.take(starts) if cols.rows is not None else None
    cols.rows = None  # only the samples' texts are used: not an index over every row
    tasks = Tasks(starts, np.diff(np.append(starts, len(cols))))
    measured = np.asarray(cols.task_index[starts], dtype=np.int64)
    sizes = tasks.sizes.astype(np.int64, copy=False)  # never written in place: one array serves both
    groups = GroupTable(measured, {}, sizes, sizes, [None] * len(measured))
    groups = with_expected_tasks(groups, options, counts.masked_per_task, counts.failed_per_task)
    spreads: dict[str, FieldSpread] = {}
    whole: dict[str, GroupedStats] = {}
    for k in names:
        spreads[k], overflowed = task_spread(cols.fields[k].values, valid[k], tasks, _ranged_render.RANGE_ROWS)
        if overflowed is not None:
            whole[k] = overflowed
    trim_heap()  # forked render workers start with this process's memory
    source = GroupSource(groups, cols, names, valid, tasks, measured, counts.shown, sample_rows, options.include_samples,
                         options.include_rollout_infos, whole)  # fmt: skip
    return source, spreads


def _wide(data: RolloutColumns, measured_only: bool = False) -> RolloutColumns:
    """`data` as the engine hands rows to hooks: int64 keys (merge_partials' narrow_keys), and
    for the measured rows only the keys, the fields and the masks (as _engine._measure)."""
    keys = data.task_index.astype(np.int64, copy=False), data.rollout_index.astype(np.int64, copy=False)
    if measured_only:
        return RolloutColumns(*keys, dict(data.fields), np.zeros(len(data), bool))
    return RolloutColumns(*keys, data.fields, np.asarray(data.masked), data.rows, data.row_labels, data.label_name,
                          data.errors, data.non_numeric, data.shown)  # fmt: skip


def _valid(cols: RolloutColumns, names: list[str]) -> dict[str, np.ndarray]:
    """Per field, present and finite; a column that is all True (the usual case) as a view of
    one value, and so is a field's `present` (10 MB each at 10M rollouts)."""
    n, every = len(cols), np.broadcast_to(np.True_, (len(cols),))
    valid = {}
    for k in names:
        field = cols.fields[k]
        ok = field.present & np.isfinite(field.values)
        if field.present.all():
            cols.fields[k] = NumericField(field.values, every, field.kind)
        valid[k] = every if ok.all() else ok
    cols.masked = np.broadcast_to(np.False_, (n,))
    return valid


def _accounting(data: RolloutColumns) -> tuple[dict[str, int], dict[int, int], dict[str, int], dict[str, Any]]:
    """What the engine counts over every row (coverage, masked rows per task, non-numeric
    values, shown columns of the measured rows); then the masked rows leave `data`."""
    masked = bool(data.masked.any())
    pos = np.flatnonzero(~data.masked) if masked else None
    measured = pos if pos is not None else np.arange(len(data), dtype=np.int64)
    coverage = coverage_counts(data, pos) if pos is not None else {}
    masked_per_task = masked_by_task(data, np.zeros(0, np.int64))
    non_numeric = non_numeric_counts_of(data, measured) if data.non_numeric else {}
    shown = _measured_shown(data, measured) if data.shown else {}
    del measured
    if pos is not None:
        _take_in_place(data, pos)
        data.masked = np.zeros(len(data), bool)
    return coverage, masked_per_task, non_numeric, shown


def _agent_level(
    cols: RolloutColumns, names: list[str], valid: dict[str, np.ndarray], spreads: dict[str, FieldSpread], n_tasks: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """_engine._agent_level, a field at a time."""
    agent_metrics: dict[str, Any] = {}
    n = len(cols)
    if n:
        stats = {k: whole_stats(cols.fields[k].values, valid[k]) for k in names}
        for key, col in stat_columns(stats, names, np.array([n])).items():
            if np.isfinite(col[0]):
                agent_metrics[key] = float(col[0])
        means = {k: agent_metrics[f"mean/{k}"] for k in names if f"mean/{k}" in agent_metrics}
        binary = {k: is_binary(cols.fields[k].values, valid[k]) for k in names}
        agent_metrics.update(uncertainty_metrics(spreads, means, binary))
    entries: list[dict[str, Any]] = []
    repeats = _distinct(cols.rollout_index)
    if len(repeats) >= 2:
        entries = repeat_level(cols, names, valid, n_tasks, repeats)
        agent_metrics.update(across_repeats(entries, names))
    return agent_metrics, entries


def _distinct(values: np.ndarray) -> np.ndarray:
    """`unique(values)`; counted rather than sorted when the values are small non-negative
    integers (rollout indices: no sorted copy of the column)."""
    if len(values) and values.dtype.kind in "iu" and values.min() >= 0 and values.max() < 1 << 20:
        return np.flatnonzero(np.bincount(values)).astype(values.dtype)
    return unique(values)


__all__ = ["aggregate_ranged"]
