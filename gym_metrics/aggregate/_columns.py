"""Columnar rollout batches: the unit the aggregation engine consumes.

A batch holds the (task, rollout) keys, one float64 column per numeric field (SPEC A1), the
mask flags and, optionally, a way to fetch the full rows (for samples and compute_metrics)
without holding a million dicts in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from gym_metrics.aggregate._rowsource import (  # re-exported: importers keep one place to look
    BufferRows,
    RowParseError,
    RowSource,
    _Chain,
    bad_json_reason,
    parse_row,
)
from gym_metrics.errors import FieldViolation, InvalidInputError

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"
TASK_KEY_ALIASES = (TASK_KEY, "task_index")
ROLLOUT_KEY_ALIASES = (ROLLOUT_KEY, "rollout_index")
MASK_KEY = "mask_sample"
ERROR_KEY = "_gm_error"
"""Where a rollouts file records that verifying a rollout failed: {"kind": ..., "message": ...}."""
ERROR_KINDS = ("invalid_request", "verify_failed", "timeout")
"""Error codes: 0 = verified, i + 1 = ERROR_KINDS[i]."""


def error_code(kind: Any) -> int:
    """Code of an error kind name; an unknown name counts as verify_failed."""
    return ERROR_KINDS.index(kind) + 1 if kind in ERROR_KINDS else 2


class ValueKind(str, Enum):
    """How a numeric field was typed in the rows; decides how rollout_infos print it."""

    FLOAT = "float"
    INT = "int"
    BOOL = "bool"

    @staticmethod
    def merge(a: ValueKind, b: ValueKind) -> ValueKind:
        if a is b:
            return a
        if ValueKind.FLOAT in (a, b):
            return ValueKind.FLOAT
        return ValueKind.INT  # bool with int: both print as integers


@dataclass
class NumericField:
    """One numeric field: a value per row (NaN where absent) and which rows have it."""

    values: np.ndarray
    present: np.ndarray
    kind: ValueKind = ValueKind.FLOAT

    def take(self, idx: np.ndarray) -> NumericField:
        return NumericField(self.values[idx], self.present[idx], self.kind)


@dataclass
class RolloutColumns:
    """A batch of verify responses of one agent, in columns."""

    task_index: np.ndarray
    rollout_index: np.ndarray
    fields: dict[str, NumericField]
    masked: np.ndarray
    rows: RowSource | None = None
    """Full rows by position, when the producer has them."""
    row_labels: np.ndarray | None = None
    """What to call each row in errors (e.g. its line number); defaults to its position."""
    label_name: str = "row"
    """What the labels count: "row" or "line"."""
    errors: np.ndarray | None = None
    """Per row, 0 or the code of the error that kept it from being verified (ERROR_KINDS)."""
    non_numeric: dict[str, np.ndarray] | None = None
    """Per top-level key (SPEC A1 names) some row holds as a string, object or list: which rows.
    Kept for every such key, because whether the key is a numeric field (and so whether the
    value was dropped from its stats and must be counted) is known only once all of the
    agent's rows are in."""

    def __post_init__(self) -> None:
        n = len(self.task_index)
        if len(self.rollout_index) != n or len(self.masked) != n:
            raise InvalidInputError(
                "columns of unequal length",
                [FieldViolation("rollout_index", f"has {len(self.rollout_index)} values, task_index has {n}")],
            )
        for name, col in self.fields.items():
            if len(col.values) != n or len(col.present) != n:
                raise InvalidInputError(
                    "columns of unequal length",
                    [FieldViolation(f"columns[{name}]", f"has {len(col.values)} values, task_index has {n}")],
                )
        if self.errors is not None and len(self.errors) != n:
            raise InvalidInputError(
                "columns of unequal length", [FieldViolation("error_kind", f"has {len(self.errors)} values, expected {n}")]
            )
        if self.rows is not None and len(self.rows) != n:
            raise InvalidInputError(
                "columns of unequal length", [FieldViolation("row_json", f"has {len(self.rows)} rows, expected {n}")]
            )

    def __len__(self) -> int:
        return len(self.task_index)

    def label(self, pos: int) -> int:
        return int(self.row_labels[pos]) if self.row_labels is not None else pos

    @classmethod
    def from_rows(
        cls, rows: Iterable[Mapping[str, Any]], labels: Sequence[int] | None = None, keep_rows: bool = True
    ) -> RolloutColumns:
        """Build a batch from verify-response dicts (SPEC A1 extraction, per row)."""
        rows = list(rows)
        n = len(rows)
        tasks = np.empty(n, dtype=np.int64)
        repeats = np.empty(n, dtype=np.int64)
        masked = np.zeros(n, dtype=bool)
        errors = np.zeros(n, dtype=np.int8)
        fields: dict[str, NumericField] = {}
        other: dict[str, np.ndarray] = {}
        violations: list[FieldViolation] = []
        for i, row in enumerate(rows):
            label = labels[i] if labels is not None else i
            if not isinstance(row, Mapping):
                violations.append(FieldViolation("row", "is not a JSON object", label))
                continue
            try:
                tasks[i] = row_index_value(row, TASK_KEY_ALIASES)
                repeats[i] = row_index_value(row, ROLLOUT_KEY_ALIASES)
            except InvalidInputError as exc:
                violations.extend(FieldViolation(v.field, v.description, label) for v in exc.violations)
                continue
            masked[i] = bool(row.get(MASK_KEY))
            failure = row.get(ERROR_KEY)
            if failure:
                errors[i] = error_code(failure.get("kind") if isinstance(failure, Mapping) else failure)
            for key, value, kind in row_items(row):
                if kind is None:
                    if key not in other:
                        other[key] = np.zeros(n, dtype=bool)
                    other[key][i] = True
                    continue
                col = fields.get(key)
                if col is None:
                    col = fields[key] = NumericField(np.full(n, np.nan), np.zeros(n, dtype=bool), kind)
                else:
                    col.kind = ValueKind.merge(col.kind, kind)
                col.values[i] = value
                col.present[i] = True
        if violations:
            raise InvalidInputError("invalid rows", violations)
        return cls(
            tasks,
            repeats,
            fields,
            masked,
            rows=RowSource(rows) if keep_rows else None,
            row_labels=np.asarray(labels, dtype=np.int64) if labels is not None else None,
            errors=errors if errors.any() else None,
            non_numeric=other or None,
        )


def take_non_numeric(other: dict[str, np.ndarray] | None, idx: np.ndarray) -> dict[str, np.ndarray] | None:
    """The non-numeric masks of the rows at idx (keys no longer flagged are dropped)."""
    if not other:
        return None
    out = {k: v[idx] for k, v in other.items()}
    return {k: v for k, v in out.items() if v.any()} or None


def minimal_row(fields: Mapping[str, NumericField], pos: int, task: int, rollout: int) -> dict[str, Any]:
    """A row rebuilt from its indices and numeric fields, for when the full row is unknown."""
    row: dict[str, Any] = {TASK_KEY: task, ROLLOUT_KEY: rollout}
    for k, col in fields.items():
        if col.present[pos]:
            v = float(col.values[pos])
            row[k] = bool(v) if col.kind is ValueKind.BOOL else int(v) if col.kind is ValueKind.INT and v == v else v
    return row


def row_index_value(row: Mapping[str, Any], aliases: tuple[str, ...]) -> int:
    """The row's task or rollout index: a non-negative integer under one of `aliases`."""
    for key in aliases:
        if key in row and row[key] is not None:
            value = row[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InvalidInputError("bad index", [FieldViolation(key, f"must be an integer, got {value!r}")])
            if isinstance(value, float):
                if not value.is_integer():
                    raise InvalidInputError("bad index", [FieldViolation(key, f"must be an integer, got {value!r}")])
                value = int(value)
            if value < 0:
                raise InvalidInputError("bad index", [FieldViolation(key, f"must be >= 0, got {value}")])
            return value
    raise InvalidInputError("missing index", [FieldViolation(aliases[0], f"missing (also looked for {aliases[1]!r})")])


def numeric_items(row: Mapping[str, Any]) -> Iterable[tuple[str, float, ValueKind]]:
    """The row's numeric fields (SPEC A1): top-level keys merged with response.usage.

    usage keys win on a clash (as NeMo Gym's `row | usage`); keys starting with `_` and the
    mask flag are skipped; bool counts as 0/1; nested values never count.
    """
    for key, value, kind in row_items(row):
        if kind is not None:
            yield key, value, kind


def row_items(row: Mapping[str, Any]) -> Iterable[tuple[str, Any, ValueKind | None]]:
    """Every non-null value under a SPEC A1 name, numeric (with its kind) or not (kind None:
    a string, object or list, left out of the stats but counted when the key is numeric
    elsewhere). null is "missing", as in NeMo Gym, and is not yielded."""
    merged: Mapping[str, Any] = row
    response = row.get("response")
    if isinstance(response, Mapping):
        usage = response.get("usage")
        if isinstance(usage, Mapping) and usage:
            merged = {**row, **usage}
    for key, value in merged.items():
        if key.startswith("_") or key == MASK_KEY or key in TASK_KEY_ALIASES or key in ROLLOUT_KEY_ALIASES:
            continue
        if isinstance(value, bool):
            yield key, float(value), ValueKind.BOOL
        elif isinstance(value, int):
            yield key, float(value), ValueKind.INT
        elif isinstance(value, float):
            yield key, value, ValueKind.FLOAT
        elif value is not None:
            yield key, value, None


def concat(batches: Sequence[RolloutColumns]) -> RolloutColumns:
    """One batch from many; fields missing from a batch are absent for its rows."""
    if len(batches) == 1:
        return batches[0]
    n = sum(len(b) for b in batches)
    names: dict[str, ValueKind] = {}
    for b in batches:
        for name, col in b.fields.items():
            names[name] = ValueKind.merge(names[name], col.kind) if name in names else col.kind
    fields = {}
    for name, kind in names.items():
        values = np.concatenate([b.fields[name].values if name in b.fields else np.full(len(b), np.nan) for b in batches])
        present = np.concatenate(
            [b.fields[name].present if name in b.fields else np.zeros(len(b), dtype=bool) for b in batches]
        )
        fields[name] = NumericField(values, present, kind)
    errors = None
    if any(b.errors is not None for b in batches):
        errors = np.concatenate([b.errors if b.errors is not None else np.zeros(len(b), np.int8) for b in batches])
    rows = None
    if all(b.rows is not None for b in batches):
        parts = [b.rows for b in batches if b.rows is not None]
        if all(p._index is None and isinstance(p._items, list) for p in parts):
            rows = RowSource([item for p in parts for item in p._items])  # flat: O(1) access
        elif all(p._items is parts[0]._items and p._index is not None for p in parts):
            rows = RowSource(parts[0]._items, np.concatenate([p._index for p in parts]))  # one file
        else:
            rows = RowSource(_Chain(parts))
    other = None
    if any(b.non_numeric for b in batches):
        keys = sorted({k for b in batches for k in b.non_numeric or {}})
        other = {
            k: np.concatenate([(b.non_numeric or {}).get(k, np.zeros(len(b), dtype=bool)) for b in batches]) for k in keys
        }
    labels = None
    if any(b.row_labels is not None for b in batches):
        labels = np.concatenate(
            [b.row_labels if b.row_labels is not None else np.arange(len(b), dtype=np.int64) for b in batches]
        )
    out = RolloutColumns(
        np.concatenate([b.task_index for b in batches]).astype(np.int64, copy=False),
        np.concatenate([b.rollout_index for b in batches]).astype(np.int64, copy=False),
        fields,
        np.concatenate([b.masked for b in batches]),
        rows=rows,
        row_labels=labels,
        label_name=batches[0].label_name,
        errors=errors,
        non_numeric=other,
    )
    assert len(out) == n
    return out


__all__ = [
    "ERROR_KEY",
    "ERROR_KINDS",
    "RowParseError",
    "error_code",
    "minimal_row",
    "MASK_KEY",
    "ROLLOUT_KEY",
    "TASK_KEY",
    "BufferRows",
    "NumericField",
    "RolloutColumns",
    "RowSource",
    "ValueKind",
    "concat",
    "bad_json_reason",
    "numeric_items",
    "parse_row",
    "row_items",
    "take_non_numeric",
    "row_index_value",
]
