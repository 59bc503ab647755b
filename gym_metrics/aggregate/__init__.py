"""Columnar aggregation engine (SPEC A): rollouts in, NeMo Gym-compatible metrics out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gym_metrics.aggregate._columns import NumericField, RolloutColumns, ValueKind
from gym_metrics.aggregate._engine import (
    AgentAggregate,
    AggregateOptions,
    Aggregator,
    ColumnMetrics,
    ComputeMetrics,
    GetKeyMetrics,
    GroupTable,
    LocalParts,
    default_key_metrics,
    local_parts,
    non_numeric_counts,
)
from gym_metrics.aggregate._output import iter_group_dicts, output_path_for, write_aggregate_metrics
from gym_metrics.aggregate._reader import BadLine, OnBadLine, RolloutFile, read_rollouts


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
) -> tuple[Path, list[AgentAggregate], RolloutFile]:
    """Aggregate a rollouts JSONL in-process and write `<stem>_aggregate_metrics.json`.

    `extra(agent_name, columns)` returns sections ({name: JSON-able}) added to each agent's
    entry after `non_finite_counts` (e.g. `economics`): views the engine does not compute.
    `default_agent` names the rows without an agent_ref (otherwise they are bad lines).
    """
    rollouts = read_rollouts(rollouts_path, on_bad_line=on_bad_line, default_agent=default_agent)
    results = []
    sections: dict[str, Mapping[str, Any]] = {}
    for name in sorted(rollouts.agents):
        if extra is not None:
            sections[name] = extra(name, rollouts.agents[name])
        agg = Aggregator(name, options)
        agg.add(rollouts.agents[name])
        results.append(agg.finalize(compute_metrics, get_key_metrics, column_metrics))
    out = write_aggregate_metrics(output_path or output_path_for(rollouts_path), results, sections or None)
    return out, results, rollouts


__all__ = [
    "AgentAggregate",
    "AggregateOptions",
    "Aggregator",
    "BadLine",
    "ColumnMetrics",
    "GroupTable",
    "NumericField",
    "RolloutColumns",
    "RolloutFile",
    "ValueKind",
    "aggregate_file",
    "LocalParts",
    "local_parts",
    "non_numeric_counts",
    "default_key_metrics",
    "iter_group_dicts",
    "output_path_for",
    "read_rollouts",
    "write_aggregate_metrics",
]
