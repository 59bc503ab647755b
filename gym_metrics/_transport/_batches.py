"""RolloutBatch <-> engine columns. Pure data plumbing: no domain logic, no grpc import.

Numbers move between packed proto fields and numpy arrays in bulk; per-row Python runs only
where rows are JSON text (deriving columns from `row_json`, dumping rows in the client).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from gym_metrics._transport._packed import add_doubles
from gym_metrics._util.jsonio import dumps_finite
from gym_metrics.rollouts import ERROR_KINDS, ROLLOUT_KEY, ROLLOUT_KEY_ALIASES, TASK_KEY, TASK_KEY_ALIASES, NumericField, RolloutColumns, RowSource, ShownField, ValueKind, parse_row
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

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
KIND_TO_PB = {ValueKind.FLOAT: pb.VALUE_KIND_FLOAT, ValueKind.INT: pb.VALUE_KIND_INT, ValueKind.BOOL: pb.VALUE_KIND_BOOL}

# ----------------------------------------------------------------------------- batches in


def batch_to_columns(batch: pb.RolloutBatch, where: str = "batch", row_offset: int = 0) -> RolloutColumns:
    """Validate one RolloutBatch and turn it into engine columns.

    Violations name `<where>.<field>` (`request[3].batch.row_json`, docs/grpc.md#errors) and
    the row within the batch. Non-finite doubles are data, not errors. `row_offset` numbers the
    rows across a stream (engine errors found later, such as duplicate keys, name rows by that
    number).
    """
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
    shown = None
    if len(batch.columns) == 0 and len(batch.row_json):
        derived = _derive_from_json(batch, where, task_index, rollout_index)
        fields, non_numeric, shown = derived.fields, derived.non_numeric, derived.shown
        if not len(batch.masked):
            masked = derived.masked
    else:
        fields = {name: numeric_field(col, n) for name, col in batch.columns.items()}
        _check_kinds(fields, where)
        _check_rows_are_objects(batch.row_json, where)
    rows = (
        RowSource(list(batch.row_json)) if len(batch.row_json) else None
    )
    errors = np.array(batch.error_kind, dtype=np.int8) if len(batch.error_kind) else None
    if len(batch.shown):
        shown = {name: shown_from_pb(col, n) for name, col in batch.shown.items()}
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
        shown=shown or None,
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
    for name, shown in batch.shown.items():
        field = f"{where}.shown[{name}]"
        if len(shown.values) != n:
            violations.append(FieldViolation(f"{field}.values", f"has {len(shown.values)} values, task_index has {n}"))
        for part, where_ in (("missing", list(shown.missing)), ("ints", list(shown.ints)), ("json", list(shown.json))):
            out_of_range = [p for p in where_ if p >= n]
            if out_of_range:
                violations.append(
                    FieldViolation(f"{field}.{part}", f"position {out_of_range[0]} is out of range for a batch of {n} rows")
                )
    _raise_if(violations, "columns of unequal length or out of range")


def _indices(values: Sequence[int], field: str) -> tuple[np.ndarray, list[FieldViolation]]:
    arr = np.array(values, dtype=np.int64)
    bad = np.flatnonzero(arr < 0)
    return arr, [FieldViolation(field, f"must be >= 0, got {int(arr[i])}", int(i)) for i in bad[:_MAX_VIOLATIONS]]


def _check_kinds(fields: dict[str, NumericField], where: str) -> None:
    """A column's finite values fit its kind: a BOOL column holds 0 and 1, an INT one whole
    numbers (7.0 said to be a boolean was averaged, and shown in rollout_infos, as one)."""
    violations = []
    for name, field in fields.items():
        if field.kind not in (ValueKind.BOOL, ValueKind.INT):
            continue
        v = field.values  # NaN (missing, or given) and infinities are any kind's
        bad = np.isfinite(v) & ((v != 0.0) & (v != 1.0) if field.kind is ValueKind.BOOL else v != np.floor(v))
        if bad.any():
            at = int(np.argmax(bad))
            what = "0 or 1 (its kind is VALUE_KIND_BOOL)" if field.kind is ValueKind.BOOL else "a whole number (its kind is VALUE_KIND_INT)"
            violations.append(FieldViolation(f"{where}.columns[{name}].values", f"{float(v[at])!r} is not {what}", at))
    _raise_if(violations, "column values that do not fit their kind")


def numeric_field(col: pb.NumericColumn, n: int) -> NumericField:
    values = np.array(col.values, dtype=np.float64)
    present = np.ones(n, dtype=bool)
    if len(col.missing):
        missing = np.array(col.missing, dtype=np.int64)
        present[missing] = False
        values[missing] = np.nan
    return NumericField(values, present, _KIND_FROM_PB.get(col.kind, ValueKind.FLOAT))


def _from_rows_only(batch: pb.RolloutBatch, where: str, row_offset: int) -> RolloutColumns:
    """A batch of only row_json: keys, mask and numeric fields all come from the rows
    (docs/metrics.md#numeric-fields)."""
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
        shown=derived.shown,
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
        relabelled = [  # the row's position, then the path inside its JSON
            FieldViolation(f"{where}.row_json" + (f"[{v.row}]" if v.row is not None else "") + f".{v.field}", v.description)
            for v in exc.violations
        ]
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
    return pack(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)), max_bytes) or [(0, 0)]


def pack(costs: np.ndarray, max_bytes: int) -> list[tuple[int, int]]:
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
        add_doubles(col, "values", np.where(present, field.values[lo:hi], 0.0))
        if not present.all():
            col.missing.extend(np.flatnonzero(~present).tolist())
        col.kind = KIND_TO_PB[field.kind]
    for name, shown in (cols.shown or {}).items():
        if shown.present[lo:hi].any():
            shown_to_pb(shown, lo, hi, batch.shown[name])
    return batch


def shown_to_pb(shown: ShownField, a: int, b: int, col: pb.ShownColumn) -> None:
    """Rows a..b of a shown column (see aggregate._shown); positions count from a."""
    present = shown.present[a:b]
    add_doubles(col, "values", np.where(present, np.nan_to_num(shown.values[a:b]), 0.0))
    col.missing.extend(np.flatnonzero(~present).tolist())
    col.ints.extend(np.flatnonzero(shown.ints[a:b] & present).tolist())
    if shown.text is not None:
        text = shown.text[a:b]
        for i in np.flatnonzero(present).tolist():
            if text[i] is not None:
                col.json[i] = text[i].decode()


def shown_from_pb(col: pb.ShownColumn, n: int) -> ShownField:
    values = np.array(col.values, dtype=np.float64)
    present = np.ones(n, dtype=bool)
    present[np.array(col.missing, dtype=np.int64)] = False
    ints = np.zeros(n, dtype=bool)
    ints[np.array(col.ints, dtype=np.int64)] = True
    text = None
    if len(col.json):
        text = np.full(n, None, dtype=object)
        for i, t in col.json.items():
            text[i] = t.encode()
            values[i] = np.nan
    return ShownField(values, present, ints, text)


def _row_text(raw: Any) -> str:
    """A row as JSON text: stored text goes as it is (the server parses it), dicts are dumped."""
    if isinstance(raw, bytes):
        return raw.decode()
    return raw if isinstance(raw, str) else dumps_json(raw)


def dumps_json(value: Any) -> str:
    """JSON text as the engine's output writer prints it (numpy allowed, NaN -> null); an
    integer past 64 bits, which orjson refuses, written exactly (reasoning-gym's lcm entries)."""
    return dumps_finite(value).decode()


__all__ = [
    "KIND_TO_PB",
    "MAX_BATCH_ROW_BYTES",
    "STREAM_ROW",
    "batch_to_columns",
    "columns_to_batches",
    "dumps_json",
    "numeric_field",
    "pack",
    "shown_from_pb",
    "shown_to_pb",
]
