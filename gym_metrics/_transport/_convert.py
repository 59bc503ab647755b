"""Proto <-> engine conversions. Pure data plumbing: no domain logic, no grpc import.

Numbers move between packed proto fields and numpy arrays in bulk; per-row Python runs only
where rows are JSON text (deriving columns from `row_json`, dumping rows in the client).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from gym_metrics.aggregate import AgentAggregate, GroupTable, NumericField, RolloutColumns, ValueKind
from gym_metrics.aggregate._columns import (
    ERROR_KINDS,
    ROLLOUT_KEY,
    ROLLOUT_KEY_ALIASES,
    TASK_KEY,
    TASK_KEY_ALIASES,
    RowSource,
    parse_row,
)
from gym_metrics.aggregate._engine import GROUP_STATS, RolloutInfoTable
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

_JSON_OPTS = orjson.OPT_SERIALIZE_NUMPY
_MAX_VIOLATIONS = 20
STREAM_ROW = "stream row"
"""How engine errors found after the whole stream (duplicate keys) number rows: 0-based
across every row of every batch message sent."""

_KIND_FROM_PB = {
    pb.VALUE_KIND_UNSPECIFIED: ValueKind.FLOAT,
    pb.VALUE_KIND_FLOAT: ValueKind.FLOAT,
    pb.VALUE_KIND_INT: ValueKind.INT,
    pb.VALUE_KIND_BOOL: ValueKind.BOOL,
}
_KIND_TO_PB = {ValueKind.FLOAT: pb.VALUE_KIND_FLOAT, ValueKind.INT: pb.VALUE_KIND_INT, ValueKind.BOOL: pb.VALUE_KIND_BOOL}

# repeat_level_metrics entries print their per-field stats in this order (engine `_repeat_level`).
_REPEAT_STATS = ("mean", "median", "std", "sem", "min", "max", "p25", "p75", "ci_low_95", "ci_high_95")
_REPEAT_HEAD = (ROLLOUT_KEY, "sample_count", "missing_count")


# ----------------------------------------------------------------------------- batches in


def batch_to_columns(batch: pb.RolloutBatch, batch_no: int, row_offset: int = 0) -> RolloutColumns:
    """Validate one RolloutBatch and turn it into engine columns.

    Violations name `batch[<batch_no>].<field>` and the row within the batch. Non-finite
    doubles are data, not errors. `row_offset` numbers the rows across a stream (engine errors
    found later, such as duplicate keys, name rows by that number).
    """
    where = f"batch[{batch_no}]"
    if len(batch.task_index) == 0 and len(batch.row_json):
        return _from_rows_only(batch, where, row_offset)
    n = len(batch.task_index)
    _check_lengths(batch, where, n)
    tasks = _indices(batch.task_index, f"{where}.task_index")
    repeats = _indices(batch.rollout_index, f"{where}.rollout_index")
    _raise_if(tasks[1] + repeats[1], "invalid batch")
    task_index, rollout_index = tasks[0], repeats[0]
    masked = np.array(batch.masked, dtype=bool) if len(batch.masked) else np.zeros(n, dtype=bool)

    non_numeric = None
    if len(batch.columns) == 0 and len(batch.row_json):
        derived = _derive_from_json(batch, where, task_index, rollout_index)
        fields, non_numeric = derived.fields, derived.non_numeric
        if not len(batch.masked):
            masked = derived.masked
    else:
        fields = {name: _numeric_field(col, n) for name, col in batch.columns.items()}
        _check_rows_are_objects(batch.row_json, where)
    rows = (
        RowSource(list(batch.row_json)) if len(batch.row_json) else None
    )
    errors = np.array(batch.error_kind, dtype=np.int8) if len(batch.error_kind) else None
    return RolloutColumns(
        task_index,
        rollout_index,
        fields,
        masked,
        rows=rows,
        row_labels=np.arange(row_offset, row_offset + n, dtype=np.int64),
        label_name=STREAM_ROW,
        errors=errors if errors is not None and errors.any() else None,
        non_numeric=non_numeric,
    )


def _check_lengths(batch: pb.RolloutBatch, where: str, n: int) -> None:
    violations = []
    if len(batch.rollout_index) != n:
        violations.append(FieldViolation(f"{where}.rollout_index", f"has {len(batch.rollout_index)} values, task_index has {n}"))
    if len(batch.masked) and len(batch.masked) != n:
        violations.append(FieldViolation(f"{where}.masked", f"has {len(batch.masked)} values, task_index has {n}"))
    if len(batch.error_kind) and len(batch.error_kind) != n:
        violations.append(FieldViolation(f"{where}.error_kind", f"has {len(batch.error_kind)} values, task_index has {n}"))
    bad_kinds = [i for i, k in enumerate(batch.error_kind) if not 0 <= k <= len(ERROR_KINDS)]
    if bad_kinds:
        violations.append(FieldViolation(f"{where}.error_kind", "unknown VerifyErrorKind", bad_kinds[0]))
    if len(batch.row_json) and len(batch.row_json) != n:
        violations.append(FieldViolation(f"{where}.row_json", f"has {len(batch.row_json)} rows, task_index has {n}"))
    for name, col in batch.columns.items():
        field = f"{where}.columns[{name}]"
        if len(col.values) != n:
            violations.append(FieldViolation(f"{field}.values", f"has {len(col.values)} values, task_index has {n}"))
        if len(col.missing):
            missing = np.array(col.missing, dtype=np.int64)
            bad = missing[missing >= n]
            if len(bad):
                violations.append(
                    FieldViolation(f"{field}.missing", f"position {int(bad[0])} is out of range for a batch of {n} rows")
                )
        if col.kind not in _KIND_FROM_PB:
            violations.append(FieldViolation(f"{field}.kind", f"unknown ValueKind {col.kind}"))
    _raise_if(violations, "columns of unequal length or out of range")


def _indices(values: Sequence[int], field: str) -> tuple[np.ndarray, list[FieldViolation]]:
    arr = np.array(values, dtype=np.int64)
    bad = np.flatnonzero(arr < 0)
    return arr, [FieldViolation(field, f"must be >= 0, got {int(arr[i])}", int(i)) for i in bad[:_MAX_VIOLATIONS]]


def _numeric_field(col: pb.NumericColumn, n: int) -> NumericField:
    values = np.array(col.values, dtype=np.float64)
    present = np.ones(n, dtype=bool)
    if len(col.missing):
        missing = np.array(col.missing, dtype=np.int64)
        present[missing] = False
        values[missing] = np.nan
    return NumericField(values, present, _KIND_FROM_PB.get(col.kind, ValueKind.FLOAT))


def _from_rows_only(batch: pb.RolloutBatch, where: str, row_offset: int) -> RolloutColumns:
    """A batch of only row_json: keys, mask and numeric fields all come from the rows (SPEC A1)."""
    n = len(batch.row_json)
    violations = []
    if len(batch.rollout_index):
        violations.append(FieldViolation(f"{where}.rollout_index", f"has {len(batch.rollout_index)} values, task_index has 0"))
    if len(batch.masked) and len(batch.masked) != n:
        violations.append(FieldViolation(f"{where}.masked", f"has {len(batch.masked)} values, row_json has {n}"))
    if len(batch.columns):
        violations.append(FieldViolation(f"{where}.columns", "given without task_index / rollout_index"))
    _raise_if(violations, "invalid batch")
    derived = _derive_from_json(batch, where, None, None)
    masked = np.array(batch.masked, dtype=bool) if len(batch.masked) else derived.masked
    return RolloutColumns(
        derived.task_index,
        derived.rollout_index,
        derived.fields,
        masked,
        rows=RowSource(list(batch.row_json)),
        row_labels=np.arange(row_offset, row_offset + n, dtype=np.int64),
        label_name=STREAM_ROW,
        non_numeric=derived.non_numeric,
    )


def _derive_from_json(
    batch: pb.RolloutBatch, where: str, tasks: np.ndarray | None, repeats: np.ndarray | None
) -> RolloutColumns:
    """Columns from the parsed rows; rows without indices take the batch's (when it has them)."""
    parsed: list[dict[str, Any]] = []
    violations: list[FieldViolation] = []
    for i, raw in enumerate(batch.row_json):
        try:
            row = _loads(raw)
        except ValueError as exc:
            violations.append(FieldViolation(f"{where}.row_json", f"is not valid JSON ({exc})", i))
            continue
        if not isinstance(row, dict):
            violations.append(FieldViolation(f"{where}.row_json", f"is not a JSON object (got {type(row).__name__})", i))
            continue
        if tasks is not None and repeats is not None:
            _add_indices(row, int(tasks[i]), int(repeats[i]))
        parsed.append(row)
    _raise_if(violations, "invalid row_json")
    try:
        cols = RolloutColumns.from_rows(parsed, keep_rows=False)
    except InvalidInputError as exc:
        relabelled = [FieldViolation(f"{where}.row_json.{v.field}", v.description, v.row) for v in exc.violations]
        raise InvalidInputError("invalid row_json", relabelled) from None
    if tasks is not None and repeats is not None:
        for name, given, found in (("task_index", tasks, cols.task_index), ("rollout_index", repeats, cols.rollout_index)):
            bad = np.flatnonzero(given != found)
            violations.extend(
                FieldViolation(f"{where}.{name}", f"is {int(given[i])} but row_json says {int(found[i])}", int(i))
                for i in bad[:_MAX_VIOLATIONS]
            )
        _raise_if(violations, "task_index / rollout_index disagree with row_json")
    return cols


def _add_indices(row: dict[str, Any], task: int, repeat: int) -> None:
    if all(row.get(k) is None for k in TASK_KEY_ALIASES):
        row[TASK_KEY] = task
    if all(row.get(k) is None for k in ROLLOUT_KEY_ALIASES):
        row[ROLLOUT_KEY] = repeat


def _check_rows_are_objects(rows: Sequence[str], where: str) -> None:
    """Cheap shape check; full parsing is left to the rows that are read (samples, compute_metrics)."""
    violations = []
    for i, raw in enumerate(rows):
        if raw and raw[:1] != "{" and raw.lstrip()[:1] != "{":  # "" = row not sent
            violations.append(FieldViolation(f"{where}.row_json", "is not a JSON object", i))
            if len(violations) >= _MAX_VIOLATIONS:
                break
    _raise_if(violations, "invalid row_json")


def _loads(raw: str | bytes) -> Any:
    return parse_row(raw)  # accepts NaN / Infinity, which Python writers emit


def _raise_if(violations: list[FieldViolation], message: str) -> None:
    if violations:
        raise InvalidInputError(message, violations[:_MAX_VIOLATIONS])


# ----------------------------------------------------------------------------- batches out


MAX_BATCH_ROW_BYTES = 16 << 20
"""Row text one RolloutBatch carries at most (beyond one row): well under the message limit."""


def columns_to_batches(
    cols: RolloutColumns,
    batch_size: int,
    include_rows: bool,
    id_prefix: str = "",
    row_positions: np.ndarray | None = None,
    max_row_bytes: int = MAX_BATCH_ROW_BYTES,
) -> Iterator[pb.RolloutBatch]:
    """Split columns into packed RolloutBatch messages (ids `<prefix><k>`) of at most
    `batch_size` rollouts and, with rows, about `max_row_bytes` of row text; rows as JSON when
    asked, all of them or only those at `row_positions` ("" stands for the others)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    n = len(cols)
    send_rows = include_rows and cols.rows is not None
    k = 0
    for lo in range(0, n, batch_size):
        hi = min(lo + batch_size, n)
        texts = _row_texts(cols, lo, hi, row_positions) if send_rows else None
        for a, b in _byte_ranges(texts, max_row_bytes) if texts is not None else [(0, hi - lo)]:
            batch = _batch(cols, lo + a, lo + b, f"{id_prefix}{k}")
            if texts is not None:
                batch.row_json.extend(texts[a:b])
            k += 1
            yield batch


def _row_texts(cols: RolloutColumns, lo: int, hi: int, row_positions: np.ndarray | None) -> list[str]:
    rows = cols.rows
    assert rows is not None
    wanted = (
        list(range(lo, hi)) if row_positions is None else row_positions[(row_positions >= lo) & (row_positions < hi)].tolist()
    )
    texts = [""] * (hi - lo)
    for i, raw in zip(wanted, rows.raws(wanted)):
        texts[i - lo] = _row_text(raw)
    return texts


def _byte_ranges(texts: list[str], max_bytes: int) -> list[tuple[int, int]]:
    """Consecutive ranges of `texts` of at most max_bytes each (a longer text goes alone)."""
    return _pack(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), max_bytes) or [(0, 0)]


def _pack(costs: np.ndarray, max_bytes: int) -> list[tuple[int, int]]:
    """Greedy consecutive ranges whose costs add up to at most max_bytes (at least one item
    each), one searchsorted per range: prefix[i] = cost of the items before i."""
    prefix = np.concatenate(([0], np.cumsum(costs)))
    ranges, lo = [], 0
    while lo < len(costs):
        hi = max(lo + 1, int(np.searchsorted(prefix, prefix[lo] + max_bytes, side="right")) - 1)
        ranges.append((lo, hi))
        lo = hi
    return ranges


def _batch(cols: RolloutColumns, lo: int, hi: int, batch_id: str) -> pb.RolloutBatch:
    """Rollouts lo..hi as one RolloutBatch without rows: indices, mask, errors, packed fields."""
    batch = pb.RolloutBatch(
        batch_id=batch_id, task_index=cols.task_index[lo:hi].tolist(), rollout_index=cols.rollout_index[lo:hi].tolist()
    )
    masked = cols.masked[lo:hi]
    if masked.any():
        batch.masked.extend(masked.tolist())
    if cols.errors is not None and cols.errors[lo:hi].any():
        batch.error_kind.extend(cols.errors[lo:hi].tolist())
    for name, field in cols.fields.items():
        present = field.present[lo:hi]
        if not present.any():
            continue
        col = batch.columns[name]
        col.values.extend(np.where(present, field.values[lo:hi], 0.0).tolist())
        if not present.all():
            col.missing.extend(np.flatnonzero(~present).tolist())
        col.kind = _KIND_TO_PB[field.kind]
    return batch


def _row_text(raw: Any) -> str:
    """A row as JSON text: stored text goes as it is (the server parses it), dicts are dumped."""
    if isinstance(raw, bytes):
        return raw.decode()
    return raw if isinstance(raw, str) else dumps_json(raw)


def dumps_json(value: Any) -> str:
    """JSON text as the engine's output writer prints it (numpy allowed, NaN -> null)."""
    return orjson.dumps(value, option=_JSON_OPTS).decode()


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
        _texts(agg.groups.samples),
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
    samples = _texts(agg.groups.samples)
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
        agg.groups = _concat_groups([agg.groups, *(_groups_from_pb(p.metrics.group_level_metrics) for p in parts[1:])])
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
        per_task += np.diff(groups.info_starts) * (24 + 10 * len(groups.rollout_infos.fields))
    return _pack(per_task, max_bytes)


def _concat_groups(tables: list[GroupTable]) -> GroupTable:
    keys = list(tables[0].stats)
    out = GroupTable(
        task_index=np.concatenate([t.task_index for t in tables]),
        stats={k: np.concatenate([t.stats.get(k, np.full(len(t), np.nan)) for t in tables]) for k in keys},
        num_rollouts=np.concatenate([t.num_rollouts for t in tables]),
        expected_num_rollouts=np.concatenate([t.expected_num_rollouts for t in tables]),
        samples=[s for t in tables for s in t.samples],
        custom=None
        if all(t.custom is None for t in tables)
        else [c for t in tables for c in (t.custom if t.custom is not None else [None] * len(t))],
    )
    infos = [t.rollout_infos for t in tables]
    if all(i is not None for i in infos):
        names = sorted({name for i in infos for name in i.fields})  # type: ignore[union-attr]
        fields = {}
        for name in names:
            parts = [
                i.fields.get(name) or NumericField(np.full(len(i.task_index), np.nan), np.zeros(len(i.task_index), bool))  # type: ignore[union-attr]
                for i in infos
            ]
            kind = parts[0].kind
            fields[name] = NumericField(
                np.concatenate([p.values for p in parts]), np.concatenate([p.present for p in parts]), kind
            )
        out.rollout_infos = RolloutInfoTable(
            np.concatenate([i.task_index for i in infos]),  # type: ignore[union-attr]
            np.concatenate([i.rollout_index for i in infos]),  # type: ignore[union-attr]
            fields,
        )
        out.info_starts = np.concatenate(([0], np.cumsum(out.num_rollouts))).astype(np.int64)
    return out


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
        g.stats[key].values.extend(np.asarray(stat[lo:hi], dtype=np.float64).tolist())
    g.num_rollouts.extend(num.tolist())
    g.expected_num_rollouts.extend(expected.tolist())
    g.missing_num_rollouts.extend((expected - num).tolist())
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(expected == 0, 100.0, 100.0 * num / np.where(expected == 0, 1, expected))
    g.reward_profile_completion_pct.extend(pct.tolist())
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
            col.values.extend(np.where(present, field.values[a:b], 0.0).tolist())
            col.missing.extend(np.flatnonzero(~present).tolist())
            col.kind = _KIND_TO_PB[field.kind]


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
        groups.rollout_infos = RolloutInfoTable(
            np.array(infos.task_index, dtype=np.int64),
            np.array(infos.rollout_index, dtype=np.int64),
            {name: _numeric_field(infos.values[name], len(infos.task_index)) for name in sorted(infos.values)},
        )
        groups.info_starts = np.concatenate(([0], np.cumsum(num))).astype(np.int64)
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
    "responses_to_aggregate",
    "batch_to_columns",
    "columns_to_batches",
    "dumps_json",
    "metrics_to_aggregate",
]
