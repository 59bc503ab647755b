"""Columnar aggregation engine: rollouts in, NeMo Gym-compatible metrics out.

Definitions: docs/metrics.md#aggregate-metrics.

The rows it reads are gym_metrics.rollouts' vocabulary; the file's rendering is in `render/`,
the sharded partials and their merge in `shards/`. Other packages import the names below from
here, never from the private modules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gym_metrics.rollouts import DuplicateKeysError, OnBadLine, RolloutColumns, RolloutFile, perf_blocks, read_rollouts
from gym_metrics.aggregate._engine import (
    AggregateOptions,
    Aggregator,
    ColumnarComputeMetrics,
    ColumnMetrics,
    ComputeMetrics,
    GetKeyMetrics,
    LocalParts,
    default_key_metrics,
    local_parts,
    non_numeric_counts,
)
from gym_metrics.aggregate._accounting import apply_errors, counted_errors_as_zero
from gym_metrics.aggregate._metric_columns import MetricColumns
from gym_metrics.aggregate._perf import perf_sections, perf_summary
from gym_metrics.aggregate._uncertainty import ADDED_AGENT_METRICS
from gym_metrics.aggregate._groups import GROUP_STATS
from gym_metrics.aggregate._tables import AgentAggregate, GroupTable, RolloutInfoTable
from gym_metrics.aggregate.render._output import GroupsRender, iter_group_dicts, output_path_for, write_aggregate_metrics
from gym_metrics.aggregate.render._sections import add_agent_sections, agent_names
from gym_metrics.aggregate._stats import t_interval
from gym_metrics.aggregate.shards._ranged import aggregate_ranged
from gym_metrics.aggregate.shards._repeated_keys import refuse_files_given_twice
from gym_metrics.aggregate.shards._partial import FORMAT as PARTIAL_FORMAT, VERSION as PARTIAL_VERSION, combine, merge_partials, partial_bad_lines, partial_bytes, partial_rows, read_partial, refuse_keys_across_partials, write_partial


def aggregate_file(
    rollouts_path: str | Path,
    output_path: str | Path | None = None,
    *,
    options: AggregateOptions | None = None,
    compute_metrics: ComputeMetrics | None = None,
    get_key_metrics: GetKeyMetrics | None = None,
    on_bad_line: OnBadLine = "fail",
    extra: Callable[[str, RolloutColumns], Mapping[str, Any]] | None = None,
    column_metrics: ColumnMetrics | None = None,
    default_agent: str | None = None,
    compute_metrics_columns: ColumnarComputeMetrics | None = None,
    keep_rows: bool = True,
) -> tuple[Path, list[AgentAggregate], RolloutFile]:
    """Aggregate a rollouts JSONL in-process and write `<stem>_aggregate_metrics.json`.

    `extra(agent_name, columns)` returns sections ({name: JSON-able}) added to each agent's
    entry after `non_finite_counts` (e.g. `economics`): views the engine does not compute.
    `default_agent` names the rows without an agent_ref (otherwise they are bad lines).
    `keep_rows=False`: the returned RolloutFile keeps of the text only each task's sample rows
    (memory then holds the columns, not the file); a row-dict `compute_metrics` keeps them all.
    """
    rollouts = read_rollouts(
        rollouts_path, on_bad_line=on_bad_line, default_agent=default_agent, keep_rows=keep_rows or compute_metrics is not None
    )
    out = Path(output_path or output_path_for(rollouts_path))
    results = aggregate_rollouts(
        rollouts, out, options=options, compute_metrics=compute_metrics, get_key_metrics=get_key_metrics,
        extra=with_perf_summaries(rollouts, extra), column_metrics=column_metrics,
        compute_metrics_columns=compute_metrics_columns,
    )  # fmt: skip
    return out, results, rollouts


def with_perf_summaries(
    rollouts: RolloutFile, extra: Callable[[str, RolloutColumns], Mapping[str, Any]] | None
) -> Callable[[str, RolloutColumns], Mapping[str, Any]] | None:
    """`extra` with each agent's `perf_summary` first (aggregate/_perf.py) when rows of
    `rollouts` hold `ng_perf` blocks."""
    blocks = perf_blocks(rollouts)
    if not blocks:
        return extra
    perf = perf_sections(blocks, {name: len(cols) for name, cols in rollouts.agents.items()})

    def sections(name: str, cols: RolloutColumns) -> Mapping[str, Any]:
        return {**perf.get(name, {}), **(extra(name, cols) if extra is not None else {})}

    return sections


def aggregate_rollouts(
    rollouts: RolloutFile,
    out: Path,
    *,
    options: AggregateOptions | None = None,
    compute_metrics: ComputeMetrics | None = None,
    get_key_metrics: GetKeyMetrics | None = None,
    extra: Callable[[str, RolloutColumns], Mapping[str, Any]] | None = None,
    column_metrics: ColumnMetrics | None = None,
    compute_metrics_columns: ColumnarComputeMetrics | None = None,
) -> list[AgentAggregate]:
    """Aggregate rollouts already read (a file, several, or merged partials) into `out`.
    The result depends only on the rows, not on their order: `extra` sees them sorted by
    (task, rollout) too."""
    results = []
    sections: dict[str, Mapping[str, Any]] = {}
    out.parent.mkdir(parents=True, exist_ok=True)
    hooks = (compute_metrics, get_key_metrics, column_metrics, compute_metrics_columns)
    for name in sorted(rollouts.agents):
        if extra is not None:
            cols = rollouts.agents[name]
            order, _ = cols.key_order()
            sections[name] = extra(name, cols if order is None else cols.take(order))
        agg = Aggregator(name, options)
        agg.add(rollouts.agents[name])
        # the groups' rendering starts in forked workers while the agent level is computed
        results.append(agg.finalize(*hooks, groups_ready=lambda groups: GroupsRender(groups, out.parent)))
    write_aggregate_metrics(out, results, sections or None)
    return results


def aggregate_partials(
    partials: Sequence[str | Path], output_path: str | Path, **hooks: Any
) -> tuple[Path, list[AgentAggregate], RolloutFile]:
    """Merge partial files (`write_partial`) and write the metrics file one process reading
    every row would have written, byte for byte (docs/pipelines.md#sharded-aggregation).

    Without a `compute_metrics` or `compute_metrics_columns` hook the merge computes and writes
    a range of tasks at a time (about the memory of the rows' columns): then the returned
    RolloutFile has its rows_read and bad_lines but no agents' columns (they were consumed),
    and each result's groups carry their counts but not their stats (those went to the file)."""
    ranged = hooks.get("compute_metrics") is None and hooks.get("compute_metrics_columns") is None
    rollouts = merge_partials(partials, narrow_keys=ranged)
    out = Path(output_path)
    hooks["extra"] = with_perf_summaries(rollouts, hooks.get("extra"))  # the partials carry the ng_perf blocks
    try:
        if ranged:
            plain = {k: v for k, v in hooks.items() if k not in ("compute_metrics", "compute_metrics_columns")}
            return out, aggregate_ranged(rollouts, out, **plain), rollouts
        return out, aggregate_rollouts(rollouts, out, **hooks), rollouts
    except DuplicateKeysError:
        refuse_keys_across_partials(partials)  # the same, naming files and rows
        raise


__all__ = [
    "ADDED_AGENT_METRICS",
    "add_agent_sections",
    "apply_errors",
    "counted_errors_as_zero",
    "perf_sections",
    "with_perf_summaries",
    "agent_names",
    "PARTIAL_FORMAT",
    "PARTIAL_VERSION",
    "aggregate_partials",
    "aggregate_rollouts",
    "combine",
    "merge_partials",
    "partial_bad_lines",
    "refuse_files_given_twice",
    "partial_bytes",
    "partial_rows",
    "read_partial",
    "write_partial",
    "AgentAggregate",
    "AggregateOptions",
    "Aggregator",
    "ColumnMetrics",
    "ColumnarComputeMetrics",
    "ComputeMetrics",
    "GROUP_STATS",
    "GetKeyMetrics",
    "GroupTable",
    "LocalParts",
    "MetricColumns",
    "RolloutInfoTable",
    "aggregate_file",
    "default_key_metrics",
    "iter_group_dicts",
    "perf_summary",
    "local_parts",
    "non_numeric_counts",
    "output_path_for",
    "t_interval",
    "write_aggregate_metrics",
]
