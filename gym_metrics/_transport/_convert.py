"""Engine results <-> Metrics / AggregateMetricsResponse. Pure data plumbing: no domain
logic, no grpc import. Results that grow with the data go out in size-bounded parts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from gym_metrics._transport._batches import KIND_TO_PB, dumps_json, numeric_field, pack, shown_from_pb, shown_to_pb
from gym_metrics._transport._packed import add_doubles
from gym_metrics.aggregate import GROUP_STATS, AgentAggregate, GroupTable, RolloutInfoTable
from gym_metrics.rollouts import ROLLOUT_KEY
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

# repeat_level_metrics entries print their per-field stats in this order (engine `_repeat_level`).
_REPEAT_STATS = ("mean", "median", "std", "sem", "min", "max", "p25", "p75", "ci_low_95", "ci_high_95")
_REPEAT_HEAD = (ROLLOUT_KEY, "sample_count", "missing_count")


# ----------------------------------------------------------------------------- metrics


def aggregate_to_metrics(
    agg: AgentAggregate,
    task_range: tuple[int, int] | None = None,
    texts: tuple[list[str], list[str] | None] | None = None,
) -> pb.Metrics:
    """Engine result -> Metrics (all tasks, or those in task_range); exact JSON travels beside
    the typed maps."""
    m = pb.Metrics(
        agent_ref=pb.AgentRef(name=agg.agent_name),
        agent_metrics=_numeric_map(agg.agent_metrics),
        agent_metrics_json=dumps_json(agg.agent_metrics),
        key_metrics=_numeric_map(agg.key_metrics),
        key_metrics_json=dumps_json(agg.key_metrics),
        non_finite_counts={k: int(v) for k, v in agg.non_finite_counts.items()},
        non_numeric_counts={k: int(v) for k, v in agg.non_numeric_counts.items()},
    )
    samples, custom = texts or (
        _texts(agg.groups.samples_at()),
        _texts(agg.groups.custom) if agg.groups.custom is not None else None,
    )
    _groups_to_pb(agg.groups, m.group_level_metrics, *(task_range or (0, len(agg.groups))), samples, custom)
    for entry in agg.repeat_level_metrics:
        m.repeat_level_metrics.append(
            pb.RepeatLevelMetrics(
                rollout_index=int(entry[ROLLOUT_KEY]),
                sample_count=int(entry["sample_count"]),
                missing_count=int(entry["missing_count"]),
                stats={k: float(v) for k, v in entry.items() if k not in _REPEAT_HEAD},
            )
        )
    return m


MAX_PART_BYTES = 8 << 20
"""Target size of one AggregateMetrics response part (well under any message limit)."""


def aggregate_to_responses(
    agg: AgentAggregate, received_rollouts: int, duplicate_batches: int, max_part_bytes: int = MAX_PART_BYTES
) -> Iterator[pb.AggregateMetricsResponse]:
    """The result as size-bounded parts: agent-level metrics and the first tasks, then the
    next tasks' group_level_metrics, part by part."""
    samples = _texts(agg.groups.samples_at())
    custom = _texts(agg.groups.custom) if agg.groups.custom is not None else None
    bounds = _part_bounds(agg.groups, samples, custom, max_part_bytes)
    for i, (lo, hi) in enumerate(bounds):
        if i == 0:
            m = aggregate_to_metrics(agg, task_range=(lo, hi), texts=(samples, custom))
        else:
            m = pb.Metrics()
            _groups_to_pb(agg.groups, m.group_level_metrics, lo, hi, samples, custom)
        yield pb.AggregateMetricsResponse(
            metrics=m,
            received_rollouts=received_rollouts if i == 0 else 0,
            duplicate_batches=duplicate_batches if i == 0 else 0,
            last=i == len(bounds) - 1,
        )


def responses_to_aggregate(parts: Sequence[pb.AggregateMetricsResponse]) -> AgentAggregate:
    """Reassemble the parts of one AggregateMetrics answer."""
    if not parts:
        raise InvalidInputError("empty AggregateMetrics answer", [FieldViolation("metrics", "no part received")])
    agg = metrics_to_aggregate(parts[0].metrics, received_rollouts=parts[0].received_rollouts)
    if len(parts) > 1:
        agg.groups = GroupTable.concat([agg.groups, *(_groups_from_pb(p.metrics.group_level_metrics) for p in parts[1:])])
    return agg


def _texts(values: Sequence[Any]) -> list[str]:
    """Per-task JSON text ("" for none), made once for both sizing and sending."""
    if values and all(type(v) is bytes for v in values):  # samples: one decode, not one per task
        return b"\x00".join(values).decode().split("\x00")  # JSON text never holds a raw NUL
    return ["" if v is None else v.decode() if isinstance(v, bytes) else dumps_json(v) for v in values]


def _part_bounds(
    groups: GroupTable, samples: list[str], custom: list[str] | None, max_bytes: int
) -> list[tuple[int, int]]:
    """Task ranges whose estimated encoded size stays under max_bytes (at least one task each)."""
    n = len(groups)
    if n == 0:
        return [(0, 0)]
    per_task = 48 + 9 * len(groups.stats) + np.fromiter(map(len, samples), dtype=np.int64, count=n)
    if custom is not None:
        per_task += np.fromiter(map(len, custom), dtype=np.int64, count=n)
    if groups.rollout_infos is not None and groups.info_starts is not None:
        columns = len(groups.rollout_infos.fields) + 2 * len(groups.rollout_infos.shown)
        per_task += np.diff(groups.info_starts) * (24 + 10 * columns)
    return pack(per_task, max_bytes)


def metrics_to_aggregate(m: pb.Metrics, received_rollouts: int = 0) -> AgentAggregate:
    """Metrics -> engine result, restoring every key order the output file depends on."""
    return AgentAggregate(
        agent_name=m.agent_ref.name,
        agent_metrics=orjson.loads(m.agent_metrics_json) if m.agent_metrics_json else dict(m.agent_metrics),
        key_metrics=orjson.loads(m.key_metrics_json) if m.key_metrics_json else dict(m.key_metrics),
        groups=_groups_from_pb(m.group_level_metrics),
        repeat_level_metrics=[_repeat_entry(r) for r in m.repeat_level_metrics],
        non_finite_counts={k: int(m.non_finite_counts[k]) for k in sorted(m.non_finite_counts)},
        received_rollouts=received_rollouts,
        non_numeric_counts={k: int(m.non_numeric_counts[k]) for k in sorted(m.non_numeric_counts)},
    )


def _numeric_map(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Numeric scalars only (bools as 0 / 1); nested or textual values live in the JSON."""
    out = {}
    for k, v in metrics.items():
        if isinstance(v, (bool, int, float, np.bool_, np.integer, np.floating)):
            try:
                out[k] = float(v)
            except OverflowError:  # an int beyond double range: JSON keeps it exactly
                continue
    return out


def _groups_to_pb(
    groups: GroupTable, g: pb.GroupLevelMetrics, lo: int, hi: int, samples: list[str], custom: list[str] | None
) -> None:
    """Tasks lo..hi of the table (and their rollout_infos) into g; samples and custom as text."""
    num = np.asarray(groups.num_rollouts[lo:hi], dtype=np.int64)
    expected = np.asarray(groups.expected_num_rollouts[lo:hi], dtype=np.int64)
    g.task_index.extend(np.asarray(groups.task_index[lo:hi], dtype=np.int64).tolist())
    for key, stat in groups.stats.items():
        add_doubles(g.stats[key], "values", np.asarray(stat[lo:hi], dtype=np.float64))
    g.num_rollouts.extend(num.tolist())
    g.expected_num_rollouts.extend(expected.tolist())
    g.missing_num_rollouts.extend((expected - num).tolist())
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(expected == 0, 100.0, 100.0 * num / np.where(expected == 0, 1, expected))
    add_doubles(g, "reward_profile_completion_pct", pct)
    g.sample_json.extend(samples[lo:hi])
    if custom is not None:
        g.custom_json.extend(custom[lo:hi])
    if groups.rollout_infos is not None:
        table = groups.rollout_infos
        starts = groups.info_starts
        a, b = (int(starts[lo]), int(starts[hi])) if starts is not None else (0, len(table.task_index))
        infos = g.rollout_infos
        infos.SetInParent()  # present even with no rows: presence means "rollout_infos requested"
        infos.task_index.extend(np.asarray(table.task_index[a:b], dtype=np.int64).tolist())
        infos.rollout_index.extend(np.asarray(table.rollout_index[a:b], dtype=np.int64).tolist())
        for name, field in table.fields.items():
            col = infos.values[name]
            present = field.present[a:b]
            add_doubles(col, "values", np.where(present, field.values[a:b], 0.0))
            col.missing.extend(np.flatnonzero(~present).tolist())
            col.kind = KIND_TO_PB[field.kind]
        for name, shown in table.shown.items():
            shown_to_pb(shown, a, b, infos.shown[name])


def _groups_from_pb(g: pb.GroupLevelMetrics) -> GroupTable:
    n = len(g.task_index)
    num = np.array(g.num_rollouts, dtype=np.int64)
    groups = GroupTable(
        task_index=np.array(g.task_index, dtype=np.int64),
        stats={k: np.array(g.stats[k].values, dtype=np.float64) for k in sorted(g.stats, key=_group_stat_order)},
        num_rollouts=num,
        expected_num_rollouts=np.array(g.expected_num_rollouts, dtype=np.int64),
        samples=[s.encode() if s else None for s in g.sample_json] if len(g.sample_json) else [None] * n,
        custom=[orjson.loads(c) if c else None for c in g.custom_json] if len(g.custom_json) else None,
    )
    if g.HasField("rollout_infos"):
        infos = g.rollout_infos
        n_infos = len(infos.task_index)
        groups.attach(
            RolloutInfoTable(
                np.array(infos.task_index, dtype=np.int64),
                np.array(infos.rollout_index, dtype=np.int64),
                {name: numeric_field(infos.values[name], n_infos) for name in sorted(infos.values)},
                {name: shown_from_pb(infos.shown[name], n_infos) for name in sorted(infos.shown)},
            )
        )
    return groups


def _group_stat_order(key: str) -> tuple[int, str, str]:
    """Engine order: stat-major in GROUP_STATS, then field name ascending; unknown stats last."""
    stat, _, field = key.partition("/")
    rank = GROUP_STATS.index(stat) if stat in GROUP_STATS else len(GROUP_STATS)
    return rank, stat if rank == len(GROUP_STATS) else "", field


def _repeat_entry(r: pb.RepeatLevelMetrics) -> dict[str, Any]:
    entry: dict[str, Any] = {ROLLOUT_KEY: r.rollout_index, "sample_count": r.sample_count, "missing_count": r.missing_count}
    by_field: dict[str, dict[str, float]] = {}
    for key, value in r.stats.items():
        stat, _, field = key.partition("/")
        by_field.setdefault(field, {})[stat] = value
    for field in sorted(by_field):
        stats = by_field[field]
        for stat in _REPEAT_STATS:
            if stat in stats:
                entry[f"{stat}/{field}"] = stats.pop(stat)
        for stat in sorted(stats):  # not produced by the engine today; kept, in a stable order
            entry[f"{stat}/{field}"] = stats[stat]
    return entry


__all__ = [
    "MAX_PART_BYTES",
    "aggregate_to_metrics",
    "aggregate_to_responses",
    "metrics_to_aggregate",
    "responses_to_aggregate",
]
