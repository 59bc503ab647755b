"""The aggregation engine: one agent's verify responses in, its aggregate metrics out.

Definitions: docs/metrics.md#aggregate-metrics.

Incremental: `add()` takes batches of any size in any order; `finalize()` sorts everything by
(task, rollout) first, so the result does not depend on how the rows arrived.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gym_metrics._util.unique import count_distinct, unique
from gym_metrics.rollouts import (
    ROLLOUT_KEY,
    RolloutColumns,
    ShownField,
    concat,
    take_shown,
)
from gym_metrics.aggregate._accounting import (
    apply_errors,
    coverage_counts,
    error_counts,
    failed_by_task,
    masked_by_task,
    non_numeric_counts_of,
)
from gym_metrics.aggregate._metric_columns import MetricColumns
from gym_metrics.aggregate._groups import fill_samples, merge_per_task, stat_columns
from gym_metrics.aggregate._repeats import across_repeats, add_repeat_metrics, repeat_level_entries
from gym_metrics.aggregate._rows import rows_by_task, sample_texts
from gym_metrics.aggregate._hooks import called
from gym_metrics.aggregate._tables import AgentAggregate, GroupTable, RolloutInfoTable
from gym_metrics.aggregate._stats import group_starts, grouped_stats
from gym_metrics.aggregate._uncertainty import FieldSpread, field_spread, is_binary, uncertainty_metrics

COVERAGE_KEYS = (
    "coverage/measured_rollouts",
    "coverage/masked_rollouts",
    "coverage/measured_tasks",
    "coverage/fully_masked_tasks",
)

ComputeMetrics = Callable[[list[list[dict[str, Any]]]], dict[str, Any]]
GetKeyMetrics = Callable[[dict[str, Any]], dict[str, Any]]
ColumnMetrics = Callable[[RolloutColumns], dict[str, Any]]
"""Agent metrics from the measured rows as columns, sorted by (task, rollout): for metrics
that need only numeric fields (reward reducers), so no row dict is ever built."""
ColumnarComputeMetrics = Callable[[MetricColumns], dict[str, Any]]
"""An environment's `compute_metrics_columns`: compute_metrics' answer (per_task_metrics
included) from the measured rollouts as numpy columns instead of row dicts."""


def default_key_metrics(agent_metrics: dict[str, Any]) -> dict[str, Any]:
    """docs/metrics.md#key-metrics: every `mean/` metric."""
    return {k: v for k, v in agent_metrics.items() if k.startswith("mean/")}


@dataclass
class AggregateOptions:
    """How to aggregate one agent."""

    include_rollout_infos: bool = True
    """Keep one entry per rollout in each group (about 400 bytes per rollout in JSON)."""
    expected_rollouts_per_task: int = 0
    """Rollouts each task should have; 0 means each task expects what it received."""
    expected_task_indices: Sequence[int] = ()
    """Tasks that must appear even if none of their rollouts arrive."""
    count_errors_as_zero: bool = False
    """Rollouts whose verification failed count as reward 0.0 instead of being left out."""
    include_samples: bool = True
    """Fill each group's `sample` (a client holding the rows can attach them itself)."""
    include_uncertainty: bool = True
    """Add the agent's uncertainty metrics (docs/metrics.md: cluster_stderr, ..., wilson_ci);
    off, the agent's metrics are exactly NeMo Gym's (its own `/aggregate_metrics` answer)."""


class Aggregator:
    """Collects one agent's batches; `finalize()` computes the metrics."""

    def __init__(self, agent_name: str, options: AggregateOptions | None = None) -> None:
        self.agent_name = agent_name
        self.options = options or AggregateOptions()
        self._batches: list[RolloutColumns] = []
        self._rows = 0

    def add(self, batch: RolloutColumns) -> None:
        if len(batch):
            self._batches.append(batch)
            self._rows += len(batch)

    @property
    def received_rollouts(self) -> int:
        return self._rows

    def task_count(self, expected: Sequence[int] = ()) -> int:
        """Distinct tasks among the rows added and `expected` (exact)."""
        if self._rows + len(expected) == 0:
            return 0
        indices = [b.task_index for b in self._batches] + [np.asarray(expected, dtype=np.int64)]
        return count_distinct(np.concatenate(indices))

    def finalize(
        self,
        compute_metrics: ComputeMetrics | None = None,
        get_key_metrics: GetKeyMetrics | None = None,
        column_metrics: ColumnMetrics | None = None,
        compute_metrics_columns: ColumnarComputeMetrics | None = None,
        groups_ready: Callable[[GroupTable], Any] | None = None,
        compute_repeat_metrics: ComputeMetrics | None = None,
    ) -> AgentAggregate:
        """Compute the metrics. Pure function of the set of rows added (not their order).

        Into agent_metrics, later winning on a clash: `column_metrics`' keys, then
        `compute_metrics_columns`', then `compute_metrics`'. `groups_ready(groups)` is called
        as soon as the groups are final (before the agent level when no hook can change them);
        its answer is the result's `prerender`. `compute_repeat_metrics` (NeMo Gym's hook: one
        repeat's rows by task in, metrics out) replaces the repeat-level metrics it names and
        their across-repeats summaries (_repeats.add_repeat_metrics)."""
        data = _sorted_unique(concat(self._batches)) if self._batches else None
        hooks = (compute_metrics, get_key_metrics, column_metrics, compute_metrics_columns)
        return _aggregate(self.agent_name, data, self.options, *hooks, groups_ready=groups_ready, compute_repeat_metrics=compute_repeat_metrics)


def _sorted_unique(data: RolloutColumns) -> RolloutColumns:
    """Rows sorted by (task, rollout); a repeated key is an error naming it
    (docs/metrics.md#duplicate-keys)."""
    order, dup = data.key_order()
    if order is None:
        return data  # already strictly ascending: no copies
    if len(dup):
        raise data.duplicate_keys_error(order, dup)
    return data.take(order)


@dataclass
class _Measured:
    """The rows that enter the statistics (not masked, not failed), sorted by key."""

    pos: np.ndarray
    """Their positions in the agent's rows."""
    cols: RolloutColumns
    names: list[str]
    """Fields some measured row has (a field only masked rows carry is dropped)."""
    valid: dict[str, np.ndarray]
    """Per field: present and finite."""
    starts: np.ndarray
    """Where each task starts in `cols`."""

    @property
    def tasks(self) -> np.ndarray:
        return np.asarray(self.cols.task_index[self.starts])

    @property
    def sizes(self) -> np.ndarray:
        return np.diff(np.append(self.starts, len(self.cols.task_index)))

    def __len__(self) -> int:
        return len(self.pos)


def _aggregate(
    agent_name: str,
    data: RolloutColumns | None,
    options: AggregateOptions,
    compute_metrics: ComputeMetrics | None,
    get_key_metrics: GetKeyMetrics | None,
    column_metrics: ColumnMetrics | None = None,
    compute_metrics_columns: ColumnarComputeMetrics | None = None,
    groups_ready: Callable[[GroupTable], Any] | None = None,
    compute_repeat_metrics: ComputeMetrics | None = None,
) -> AgentAggregate:
    """The stages, in the order the output's keys come: group level, agent level (whole, then
    across repeats), coverage and errors, the environment's own metrics, key metrics, then (as
    NeMo Gym, after the key metrics) the environment's repeat metrics."""
    received = len(data) if data is not None else 0
    if data is None:
        data = RolloutColumns.empty()
    num_repeats = count_distinct(data.rollout_index)
    errors = error_counts(data)
    failed_per_task = failed_by_task(data) if not options.count_errors_as_zero else {}
    data = apply_errors(data, options.count_errors_as_zero)
    ms = _measure(data)
    coverage = coverage_counts(data, ms.pos)

    groups, task_stats = _group_level(ms, data, options, failed_per_task)
    if options.include_rollout_infos:  # also when nothing was measured: every group says []
        groups.attach(_info_table(ms, data))
    per_task_hooks = compute_metrics is not None or compute_metrics_columns is not None
    prerender = groups_ready(groups) if groups_ready is not None and not per_task_hooks else None
    agent_metrics, repeat_level = _agent_level(ms, task_stats, options.include_uncertainty)
    agent_metrics.update(coverage)
    agent_metrics.update(errors)
    if len(ms):
        if column_metrics is not None:
            agent_metrics.update(called("column_metrics", column_metrics, ms.cols))
        custom: dict[str, Any] = {}
        if compute_metrics_columns is not None:
            columns = metric_columns(ms.cols, ms.starts, ms.names)
            custom.update(_add_computed(agent_metrics, groups, called("compute_metrics_columns", compute_metrics_columns, columns)))
        tasks = rows_by_task(data, ms.pos, ms.starts, ms.names) if compute_metrics is not None or compute_repeat_metrics is not None else []
        if compute_metrics is not None:
            custom.update(_add_computed(agent_metrics, groups, called("compute_metrics", compute_metrics, tasks)))
        agent_metrics["num_repeats"] = num_repeats
        key_metrics = dict(called("get_key_metrics", get_key_metrics or default_key_metrics, agent_metrics))
        if compute_repeat_metrics is not None and repeat_level:
            repeats = _by_repeat(tasks)
            per_repeat = [called("compute_repeat_metrics", compute_repeat_metrics, repeats.get(entry[ROLLOUT_KEY], [])) for entry in repeat_level]
            add_repeat_metrics(agent_metrics, repeat_level, custom, per_repeat)
    else:
        # Every rollout masked (or none received): as NeMo Gym, only the coverage block is
        # reported; there is nothing measured to count repeats of or to pick headlines from.
        key_metrics = {}
    key_metrics.update(coverage)
    key_metrics.update(errors)
    if groups_ready is not None and per_task_hooks:
        prerender = groups_ready(groups)

    non_finite = {k: int((ms.cols.fields[k].present & ~ms.valid[k]).sum()) for k in ms.names}
    return AgentAggregate(
        agent_name=agent_name,
        agent_metrics=agent_metrics,
        key_metrics=key_metrics,
        groups=groups,
        repeat_level_metrics=repeat_level,
        non_finite_counts={k: v for k, v in non_finite.items() if v},
        received_rollouts=received,
        non_numeric_counts=non_numeric_counts_of(data, ms.pos),
        prerender=prerender,
    )


def metric_columns(cols: RolloutColumns, starts: np.ndarray, names: list[str]) -> MetricColumns:
    """Measured columns sorted by (task, rollout), with their task starts, as the columnar
    hook's MetricColumns."""
    counts = np.diff(np.append(starts, len(cols.task_index))).astype(np.int64)
    values = {}
    for name in names:
        col = cols.fields[name]
        values[name] = np.where(col.present, col.values, np.nan).astype(np.float64, copy=False)
    return MetricColumns(
        np.asarray(cols.task_index[starts], dtype=np.int64),
        counts,
        np.asarray(cols.task_index, dtype=np.int64),
        np.asarray(cols.rollout_index, dtype=np.int64),
        values,
    )


def _measure(data: RolloutColumns) -> _Measured:
    if not data.masked.any():  # nothing masked (the usual case): the columns as they are
        pos = np.arange(len(data), dtype=np.int64)
        cols = RolloutColumns(data.task_index, data.rollout_index, dict(data.fields), np.zeros(len(pos), bool))
    else:
        pos = np.flatnonzero(~data.masked)
        cols = RolloutColumns(
            data.task_index[pos],
            data.rollout_index[pos],
            {k: v.take(pos) for k, v in data.fields.items()},
            np.zeros(len(pos), bool),
        )
    names = sorted(k for k, v in cols.fields.items() if v.present.any())
    valid = {k: cols.fields[k].present & np.isfinite(cols.fields[k].values) for k in names}
    return _Measured(pos, cols, names, valid, group_starts(cols.task_index))


def _group_level(
    ms: _Measured, data: RolloutColumns, options: AggregateOptions, failed_per_task: dict[int, int]
) -> tuple[GroupTable, dict[str, FieldSpread]]:
    """One group per task: its stats, counts (expected tasks and failed rollouts included)
    and sample; and each field's spread over tasks (for the agent level's uncertainty)."""
    group_ids = np.repeat(np.arange(len(ms.starts)), ms.sizes)
    stats = {k: grouped_stats(ms.cols.fields[k].values, ms.valid[k], group_ids, ms.starts) for k in ms.names}
    tasks, sizes = ms.tasks, ms.sizes
    groups = GroupTable(
        task_index=tasks,
        stats=stat_columns(stats, ms.names, sizes),
        num_rollouts=sizes.astype(np.int64),
        expected_num_rollouts=sizes.astype(np.int64),
        samples=[None] * len(tasks),
    )
    groups = with_expected_tasks(groups, options, masked_by_task(data, tasks), failed_per_task)
    if options.include_samples:
        fill_samples(groups, data, ms.pos[ms.starts] if len(ms.pos) else ms.pos, tasks, ms.names)
    return groups, {k: field_spread(s) for k, s in stats.items()}


def _info_table(ms: _Measured, data: RolloutColumns) -> RolloutInfoTable:
    fields = {k: ms.cols.fields[k] for k in ms.names}
    return RolloutInfoTable(ms.cols.task_index, ms.cols.rollout_index, fields, _measured_shown(data, ms.pos))


def _agent_level(ms: _Measured, spreads: dict[str, FieldSpread], uncertainty: bool = True) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The whole agent's stats and their uncertainty (clustered by task), then (with two or
    more repeats) the repeat level and the across-repeat block; returns (agent_metrics so
    far, repeat_level_metrics)."""
    agent_metrics: dict[str, Any] = {}
    n = len(ms.cols.task_index)
    if n:
        one_group, first = np.zeros(n, np.int64), np.zeros(1, np.int64)
        whole = {k: grouped_stats(ms.cols.fields[k].values, ms.valid[k], one_group, first) for k in ms.names}
        for key, col in stat_columns(whole, ms.names, np.array([n])).items():
            if math.isfinite(col[0]):
                agent_metrics[key] = float(col[0])
        if uncertainty:
            means = {k: agent_metrics[f"mean/{k}"] for k in ms.names if f"mean/{k}" in agent_metrics}
            binary = {k: is_binary(ms.cols.fields[k].values, ms.valid[k]) for k in ms.names}
            agent_metrics.update(uncertainty_metrics(spreads, means, binary))
    repeat_level: list[dict[str, Any]] = []
    if count_distinct(ms.cols.rollout_index) >= 2:
        repeat_level = repeat_level_entries(ms.cols, ms.names, ms.valid, len(ms.starts))
        agent_metrics.update(across_repeats(repeat_level, ms.names))
    return agent_metrics, repeat_level


def _add_computed(agent_metrics: dict[str, Any], groups: GroupTable, computed: dict[str, Any] | None) -> dict[str, Any]:
    """compute_metrics' answer: its per_task_metrics into the groups, the rest (winning on a
    clash) into agent_metrics; that rest."""
    custom = dict(computed or {})
    per_task = custom.pop("per_task_metrics", None)
    if per_task:
        merge_per_task(groups, per_task)
    agent_metrics.update(custom)
    return custom


def _by_repeat(tasks: list[list[dict[str, Any]]]) -> dict[int, list[list[dict[str, Any]]]]:
    """Per rollout index, its rows by task (tasks without one left out), as NeMo Gym hands them
    to compute_repeat_metrics; one pass over the rows."""
    out: dict[int, list[list[dict[str, Any]]]] = {}
    for task in tasks:
        mine: dict[int, list[dict[str, Any]]] = {}
        for row in task:
            mine.setdefault(row[ROLLOUT_KEY], []).append(row)  # rows_by_task gives every row its indices
        for repeat, rows in mine.items():
            out.setdefault(repeat, []).append(rows)
    return out


@dataclass
class LocalParts:
    """What a client that holds the rows can add to a result computed without them: each
    task's sample and the rollout_infos, made by the engine's own rules."""

    sample_tasks: np.ndarray
    samples: list[bytes] | None
    infos: RolloutInfoTable | None

    def attach(self, agg: AgentAggregate) -> None:
        if self.samples is not None:
            position = np.searchsorted(agg.groups.task_index, self.sample_tasks).tolist()
            for i, sample in zip(position, self.samples):
                agg.groups.samples[i] = sample
        if self.infos is not None:
            agg.groups.attach(self.infos)


def local_parts(
    batches: Sequence[RolloutColumns], count_errors_as_zero: bool, samples: bool = True, infos: bool = True
) -> LocalParts:
    """Samples and rollout_infos of these rows, for a result computed with include_samples /
    include_rollout_infos off (so the rows need not travel); independent of that result, so
    it can be computed while the result is on its way."""
    data, keep = _measured(batches, count_errors_as_zero)
    names = sorted(k for k, v in data.fields.items() if v.present[keep].any())
    tasks = data.task_index[keep]
    firsts = keep[np.flatnonzero(np.concatenate(([True], tasks[1:] != tasks[:-1])))] if len(keep) else keep
    rows = sample_texts(data, firsts.tolist(), names) if samples else None
    table = None
    if infos:
        fields = {k: data.fields[k].take(keep) for k in names}
        table = RolloutInfoTable(data.task_index[keep], data.rollout_index[keep], fields, _measured_shown(data, keep))
    return LocalParts(data.task_index[firsts], rows, table)


def non_numeric_counts(batches: Sequence[RolloutColumns], count_errors_as_zero: bool) -> dict[str, int]:
    """The result's `non_numeric_counts` for these rows, for a client whose result was computed
    from packed numeric columns (they carry no text, so only the rows' holder can count)."""
    if not any(b.non_numeric for b in batches):
        return {}
    data = apply_errors(concat(batches), count_errors_as_zero)
    return non_numeric_counts_of(data, np.flatnonzero(~data.masked))


def _measured(batches: Sequence[RolloutColumns], count_errors_as_zero: bool) -> tuple[RolloutColumns, np.ndarray]:
    """The rows sorted by key (failed rows handled as the engine does) and the measured ones."""
    data = apply_errors(_sorted_unique(concat(batches)), count_errors_as_zero)
    return data, np.flatnonzero(~data.masked)


def _measured_shown(data: RolloutColumns, measured_pos: np.ndarray) -> dict[str, ShownField]:
    """The shown columns (see _shown) of the measured rows, for the fields some of them show."""
    return {k: v for k, v in (take_shown(data.shown, measured_pos) or {}).items() if v.present.any()}


def with_expected_tasks(
    groups: GroupTable, options: AggregateOptions, masked_per_task: dict[int, int], failed_per_task: dict[int, int]
) -> GroupTable:
    """Honest expectations: tasks the caller expects, or whose rollouts all failed, appear even
    with nothing measured; failed rollouts count as missing. A task every rollout of which was
    masked does not appear (as in NeMo Gym), expected or not: it was run, and measured nothing."""
    wanted = unique(np.asarray([*options.expected_task_indices, *failed_per_task], dtype=np.int64))
    extra = wanted[~np.isin(wanted, groups.task_index, assume_unique=True)] if len(wanted) else wanted
    if len(extra) and masked_per_task:
        fully_masked = np.asarray([t for t in masked_per_task if t not in failed_per_task], dtype=np.int64)
        extra = extra[~np.isin(extra, fully_masked)]
    if len(extra):
        tasks = np.concatenate([groups.task_index, extra])
        order = np.argsort(tasks, kind="stable")
        groups = GroupTable(
            task_index=tasks[order],
            stats={k: np.concatenate([v, np.full(len(extra), np.nan)])[order] for k, v in groups.stats.items()},
            num_rollouts=np.concatenate([groups.num_rollouts, np.zeros(len(extra), np.int64)])[order],
            expected_num_rollouts=np.concatenate([groups.expected_num_rollouts, np.zeros(len(extra), np.int64)])[order],
            samples=[None] * len(tasks),
        )
    k = options.expected_rollouts_per_task
    if k:
        masked = np.array([masked_per_task.get(t, 0) for t in groups.task_index.tolist()], dtype=np.int64)
        groups.expected_num_rollouts = np.maximum(k - masked, groups.num_rollouts)
    elif failed_per_task:
        failed = np.array([failed_per_task.get(t, 0) for t in groups.task_index.tolist()], dtype=np.int64)
        groups.expected_num_rollouts = groups.num_rollouts + failed
    return groups
