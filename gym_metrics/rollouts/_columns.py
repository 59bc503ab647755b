"""Columnar rollout batches: the unit the aggregation engine consumes.

A batch holds the (task, rollout) keys, one float64 column per numeric field
(docs/metrics.md#numeric-fields), the
mask flags and, optionally, a way to fetch the full rows (for samples and compute_metrics)
without holding a million dicts in memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gym_metrics.rollouts._rowsource import (  # re-exported: importers keep one place to look
    BufferRows,
    RowParseError,
    RowSource,
    _Chain,
    bad_json_reason,
    parse_row,
)
from gym_metrics.rollouts._shown import ShownField, concat_shown, take_shown
from gym_metrics.rollouts._values import (  # re-exported, as above
    ERROR_KEY,
    ERROR_KINDS,
    MASK_KEY,
    ROLLOUT_KEY,
    ROLLOUT_KEY_ALIASES,
    TASK_KEY,
    TASK_KEY_ALIASES,
    NumericField,
    ValueKind,
    _FieldBuilder,
    error_code,
    minimal_row,
    not_a_field,
    numeric_items,
    row_index_value,
    row_items,
    shown_of_field,
)
from gym_metrics.errors import FieldViolation, InvalidInputError


class DuplicateKeysError(InvalidInputError):
    """Rows repeat a (task, rollout) key: a caller that joined inputs can name their files.
    `pairs`: up to 10 repeats as (task, rollout, one row's label, the other's), in the order
    of the violations."""

    def __init__(self, message: str, violations: list[FieldViolation], pairs: Sequence[tuple[int, int, int, int]] = ()) -> None:
        super().__init__(message, violations)
        self.pairs = list(pairs)


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
    """Per top-level key (a docs/metrics.md#numeric-fields name) some row holds as a string,
    object or list: which rows.
    Kept for every such key, because whether the key is a numeric field (and so whether the
    value was dropped from its stats and must be counted) is known only once all of the
    agent's rows are in."""
    shown: dict[str, ShownField] | None = None
    """Per field whose rollout_infos cannot be read off its stats column: what they show, row
    by row (see _shown). Usually None."""

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
    def empty(cls) -> RolloutColumns:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), {}, np.zeros(0, bool))

    def take(self, idx: np.ndarray) -> RolloutColumns:
        """The rows at positions `idx`, every column with them."""
        return RolloutColumns(
            self.task_index[idx],
            self.rollout_index[idx],
            {k: v.take(idx) for k, v in self.fields.items()},
            self.masked[idx],
            rows=self.rows.take(idx) if self.rows is not None else None,
            row_labels=self.row_labels[idx] if self.row_labels is not None else None,
            label_name=self.label_name,
            errors=self.errors[idx] if self.errors is not None else None,
            non_numeric=take_non_numeric(self.non_numeric, idx),
            shown=take_shown(self.shown, idx),
        )

    def key_order(self) -> tuple[np.ndarray | None, np.ndarray]:
        """The one duplicate-key check (aggregation, collect and compare use it): (the order
        sorting the rows by (task, rollout), None when they already ascend strictly; the
        positions i in that order where the next row repeats row i's key)."""
        t, r = self.task_index, self.rollout_index
        if np.all((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (r[1:] > r[:-1]))):
            return None, np.zeros(0, np.int64)  # files usually are sorted: no copies
        order = np.lexsort((r, t))
        t, r = t[order], r[order]
        return order, np.flatnonzero((t[1:] == t[:-1]) & (r[1:] == r[:-1]))

    def duplicate_keys_error(self, order: np.ndarray, dup: np.ndarray) -> DuplicateKeysError:
        """The error for the repeated keys `key_order` found (docs/metrics.md#duplicate-keys),
        naming up to 10 and
        the rows holding them."""
        violations, pairs = [], []
        for i in dup[:10].tolist():
            a, b = sorted((self.label(int(order[i])), self.label(int(order[i + 1]))))
            pairs.append((int(self.task_index[order[i]]), int(self.rollout_index[order[i]]), a, b))
            where = f", also at {self.label_name} {a}" if self.row_labels is not None else ""
            violations.append(
                FieldViolation(
                    "(_ng_task_index, _ng_rollout_index)",
                    f"duplicate key (task {self.task_index[order[i]]}, rollout {self.rollout_index[order[i]]}){where}",
                    row=b if self.row_labels is not None else None,
                    row_name=self.label_name,
                )
            )
        return DuplicateKeysError(f"{len(dup)} duplicate (task, rollout) keys", violations, pairs)

    @classmethod
    def from_rows(
        cls, rows: Iterable[Mapping[str, Any]], labels: Sequence[int] | None = None, keep_rows: bool = True
    ) -> RolloutColumns:
        """Build a batch from verify-response dicts (docs/metrics.md#numeric-fields, per row)."""
        rows = list(rows)
        n = len(rows)
        tasks = np.empty(n, dtype=np.int64)
        repeats = np.empty(n, dtype=np.int64)
        masked = np.zeros(n, dtype=bool)
        errors = np.zeros(n, dtype=np.int8)
        builder = _FieldBuilder(n)
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
            builder.add(i, row)
        if violations:
            raise InvalidInputError("invalid rows", violations)
        fields, other, shown = builder.finish()
        return cls(
            tasks,
            repeats,
            fields,
            masked,
            rows=RowSource(rows) if keep_rows else None,
            row_labels=np.asarray(labels, dtype=np.int64) if labels is not None else None,
            errors=errors if errors.any() else None,
            non_numeric=other or None,
            shown=shown or None,
        )


def shown_of(cols: RolloutColumns, name: str) -> ShownField:
    """How rollout_infos show `name` in these rows."""
    if cols.shown and name in cols.shown:
        return cols.shown[name]
    return shown_of_field(cols.fields.get(name), len(cols))


def take_non_numeric(other: dict[str, np.ndarray] | None, idx: np.ndarray) -> dict[str, np.ndarray] | None:
    """The non-numeric masks of the rows at idx (keys no longer flagged are dropped)."""
    if not other:
        return None
    out = {k: v[idx] for k, v in other.items()}
    return {k: v for k, v in out.items() if v.any()} or None


def concat(batches: Sequence[RolloutColumns]) -> RolloutColumns:
    """One batch from many; fields missing from a batch are absent for its rows."""
    if len(batches) == 1:
        return batches[0]
    n = sum(len(b) for b in batches)
    names, mixed = _merged_kinds(batches)
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
            rows = RowSource.join_kept(parts) or RowSource(_Chain(parts))
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
    shown_names = sorted(mixed | {k for b in batches for k in b.shown or {}})
    if shown_names:
        out.shown = {k: concat_shown([shown_of(b, k) for b in batches]) for k in shown_names}
    assert len(out) == n
    return out


def _merged_kinds(batches: Sequence[RolloutColumns]) -> tuple[dict[str, ValueKind], set[str]]:
    """Each field's kind over the batches whose values say something (finite ones), and the
    fields typed as ints in some batches and floats in others: each row is shown as it was."""
    return merge_kinds(
        [{name: (col.kind, bool((col.present & np.isfinite(col.values)).any())) for name, col in b.fields.items()} for b in batches]
    )


def merge_kinds(batches: Sequence[Mapping[str, tuple[ValueKind, bool]]]) -> tuple[dict[str, ValueKind], set[str]]:
    """`_merged_kinds` from each batch's (kind, has a finite value) per field, for callers
    that know those without the batches (a merge reading partials column by column)."""
    kinds: dict[str, list[ValueKind]] = {}
    fallback: dict[str, ValueKind] = {}
    for b in batches:
        for name, (kind, finite) in b.items():
            fallback.setdefault(name, kind)
            if finite:
                kinds.setdefault(name, []).append(kind)
    merged: dict[str, ValueKind] = {}
    mixed = set()
    for name, first in fallback.items():
        seen = kinds.get(name, [first])
        kind = seen[0]
        for other in seen[1:]:
            kind = ValueKind.merge(kind, other)
        merged[name] = kind
        if kind is ValueKind.FLOAT and any(k is not ValueKind.FLOAT for k in seen):
            mixed.add(name)
    return merged, mixed


__all__ = [
    "DuplicateKeysError",
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
    "merge_kinds",
    "bad_json_reason",
    "numeric_items",
    "parse_row",
    "row_items",
    "take_non_numeric",
    "row_index_value",
    "ROLLOUT_KEY_ALIASES",
    "TASK_KEY_ALIASES",
    "ShownField",
    "not_a_field",
    "concat_shown",
    "shown_of",
    "shown_of_field",
    "take_shown",
]
