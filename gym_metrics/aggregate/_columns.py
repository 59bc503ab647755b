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
import orjson

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


def parse_row(raw: Any) -> dict[str, Any]:
    """A row from a dict or JSON text; the stdlib fallback reads the NaN / Infinity literals
    that Python writers emit."""
    if isinstance(raw, dict):
        return raw
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        import json

        return json.loads(raw)


class RowSource(Sequence[dict[str, Any]]):
    """Full rows by position, parsed on access, so a million rows never live as dicts.

    `items` holds dicts, JSON strings or bytes; `index` (optional) maps positions to items.
    """

    def __init__(self, items: Sequence[Any], index: np.ndarray | None = None) -> None:
        self._items = items
        self._index = index

    def __len__(self) -> int:
        return len(self._items) if self._index is None else len(self._index)

    def raw(self, i: int) -> Any:
        return self._items[i if self._index is None else int(self._index[i])]

    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        return parse_row(self.raw(i))

    def take(self, idx: np.ndarray) -> RowSource:
        return RowSource(self._items, idx if self._index is None else self._index[idx])

    def raws(self, positions: Sequence[int]) -> list[Any]:
        """The rows at `positions` as stored (dict, JSON text or bytes), unparsed."""
        if isinstance(self._items, _Chain):
            idx = np.asarray(positions, dtype=np.int64) if self._index is None else self._index[positions]
            return self._items.raws(idx)
        if isinstance(self._items, BufferRows):  # one slice per row, straight from the buffer
            lines = self._items
            idx = np.asarray(positions, dtype=np.int64) if self._index is None else self._index[positions]
            buf = lines.buffer
            return [buf[a:b] for a, b in zip(lines.starts[idx].tolist(), lines.ends[idx].tolist())]
        return [self.raw(p) for p in positions]

    def load(self, positions: Sequence[int]) -> list[dict[str, Any] | None]:
        """Parse many rows at once (one orjson call over the joined text when it can); None
        where a row was not sent (an empty string). A bad row raises RowParseError."""
        raws = self.raws(positions)
        if raws and all(isinstance(r, bytes) and r for r in raws):
            try:
                return orjson.loads(b"[" + b",".join(raws) + b"]")
            except orjson.JSONDecodeError:
                pass
        if raws and all(isinstance(r, str) and r for r in raws):
            try:
                return orjson.loads("[" + ",".join(raws) + "]")
            except orjson.JSONDecodeError:
                pass
        out: list[dict[str, Any] | None] = []
        for p, r in zip(positions, raws):
            if isinstance(r, (bytes, str)) and not r:
                out.append(None)
                continue
            try:
                row = parse_row(r)
            except ValueError as exc:
                raise RowParseError(p, f"is not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise RowParseError(p, f"is not a JSON object (got {type(row).__name__})")
            out.append(row if not isinstance(r, dict) else dict(row))
        return out


class RowParseError(ValueError):
    """A full row that could not be parsed, at `position` of its RowSource."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"row {position}: {reason}")
        self.position, self.reason = position, reason


class BufferRows(Sequence[bytes]):
    """Lines of an in-memory JSONL buffer, by (start, end) offsets: rows without dicts."""

    def __init__(self, buffer: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        self.buffer = buffer
        self.starts = starts
        self.ends = ends

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> bytes:  # type: ignore[override]
        return self.buffer[int(self.starts[i]) : int(self.ends[i])]


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
            for key, value, kind in numeric_items(row):
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
        )


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
    )
    assert len(out) == n
    return out


class _Chain(Sequence[Any]):
    """Raw rows of several RowSources addressed by one global position."""

    def __init__(self, parts: list[RowSource]) -> None:
        self._parts = parts
        self._offsets = np.cumsum([0] + [len(p) for p in parts])

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def __getitem__(self, i: int) -> Any:  # type: ignore[override]
        part = int(np.searchsorted(self._offsets, i, side="right")) - 1
        return self._parts[part].raw(i - int(self._offsets[part]))

    def raws(self, idx: np.ndarray) -> list[Any]:
        """Many rows at once: positions grouped by part, each part read in bulk."""
        part = np.searchsorted(self._offsets, idx, side="right") - 1
        out: list[Any] = [None] * len(idx)
        for p in np.unique(part).tolist():
            where = np.flatnonzero(part == p)
            local = (idx[where] - self._offsets[p]).tolist()
            for i, raw in zip(where.tolist(), self._parts[p].raws(local)):
                out[i] = raw
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
    "numeric_items",
    "parse_row",
    "row_index_value",
]
