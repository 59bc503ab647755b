"""Typed values of rows: which keys are numeric fields (docs/metrics.md#numeric-fields), their
kinds, and the columns
`RolloutColumns.from_rows` builds from them a row at a time."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np

from gym_metrics.rollouts._shown import MAX_EXACT_INT, ShownField, apply_overrides, shown_overrides
from gym_metrics.errors import FieldViolation, InvalidInputError

TASK_KEY = "_ng_task_index"
ROLLOUT_KEY = "_ng_rollout_index"
TASK_KEY_ALIASES = (TASK_KEY, "task_index")
ROLLOUT_KEY_ALIASES = (ROLLOUT_KEY, "rollout_index")
MASK_KEY = "mask_sample"
ERROR_KEY = "_gm_error"
"""Where a rollouts file records that verifying a rollout failed: {"kind": ..., "message": ...}."""
ERROR_KINDS = ("invalid_request", "verify_failed", "timeout", "generation")
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


class _FieldBuilder:
    """from_rows' columns, a row at a time: the numeric fields (docs/metrics.md#numeric-fields),
    the non-numeric
    values, and the shown columns of the fields whose rollout_infos need them (_shown)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.fields: dict[str, NumericField] = {}
        self.other: dict[str, np.ndarray] = {}
        self.kinds: dict[str, ValueKind] = {}
        """Per field, the kinds of its finite values merged (a NaN says nothing about a type)."""
        self.int_rows: dict[str, np.ndarray] = {}
        self.overrides: dict[str, dict[int, Any]] = {}

    def add(self, i: int, row: Mapping[str, Any]) -> None:
        for key, value, kind in row_items(row):
            if kind is None:
                if key not in self.other:
                    self.other[key] = np.zeros(self.n, dtype=bool)
                self.other[key][i] = True
                continue
            col = self.fields.get(key)
            if col is None:
                col = self.fields[key] = NumericField(np.full(self.n, np.nan), np.zeros(self.n, dtype=bool), kind)
            col.values[i] = value
            col.present[i] = True
            if not math.isfinite(value):
                continue
            known = self.kinds.get(key)
            self.kinds[key] = kind if known is None else ValueKind.merge(known, kind)
            if kind is not ValueKind.FLOAT:
                if key not in self.int_rows:
                    self.int_rows[key] = np.zeros(self.n, dtype=bool)
                self.int_rows[key][i] = True
                if abs(value) >= MAX_EXACT_INT:  # shown from the exact int, not the float
                    self.overrides.setdefault(key, {})[i] = _raw_value(row, key)
        for key, shown in shown_overrides(row, not_a_field):
            self.overrides.setdefault(key, {})[i] = shown

    def finish(self) -> tuple[dict[str, NumericField], dict[str, np.ndarray], dict[str, ShownField]]:
        shown: dict[str, ShownField] = {}
        for key, col in self.fields.items():
            col.kind = self.kinds.get(key, ValueKind.FLOAT)
            if col.kind is ValueKind.FLOAT and key in self.int_rows:  # ints beside floats: each as it was
                shown[key] = ShownField.plain(col.values, col.present, self.int_rows[key])
        for key, rows in self.overrides.items():
            base = shown.get(key) or shown_of_field(self.fields.get(key), self.n)
            shown[key] = apply_overrides(base, rows)
        return self.fields, self.other, shown


def _raw_value(row: Mapping[str, Any], key: str) -> Any:
    """The value `row | response.usage` holds under key."""
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    return usage[key] if isinstance(usage, Mapping) and key in usage else row[key]


def shown_of_field(col: NumericField | None, n: int) -> ShownField:
    """What rollout_infos show of a stats column that has no shown column of its own."""
    if col is None:
        return ShownField(np.full(n, np.nan), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))
    return ShownField.plain(col.values, col.present, col.kind is not ValueKind.FLOAT)


def minimal_row(fields: Mapping[str, NumericField], pos: int, task: int, rollout: int) -> dict[str, Any]:
    """A row rebuilt from its indices and numeric fields, for when the full row is unknown."""
    row: dict[str, Any] = {TASK_KEY: task, ROLLOUT_KEY: rollout}
    for k, col in fields.items():
        if col.present[pos]:
            v = float(col.values[pos])
            if not math.isfinite(v) or col.kind is ValueKind.FLOAT:
                row[k] = v
            else:
                row[k] = bool(v) if col.kind is ValueKind.BOOL else int(v)
    return row


PERF_KEY = "ng_perf"
"""A rollout's perf block (rollouts/_perf_blocks.py)."""

RECORDING_KEYS = ("ng_trajectory", "ng_model_call_capture", "ng_agent_observations")
"""A rollout's recording (its trajectory, model calls, agent observations): tens of KB a row,
kept in the rollouts file and out of a task's `sample` in the metrics (NeMo Gym's collection
strips the same keys before it aggregates)."""

MAX_INDEX = 2**63 - 2
"""The largest task or rollout index: indices are int64 columns, and the next task's (index + 1)
must be one too."""


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
            if value > MAX_INDEX:
                raise InvalidInputError("bad index", [FieldViolation(key, f"must be at most {MAX_INDEX:,} (indices are 64-bit), got {value:.6g}")])
            return value
    raise InvalidInputError("missing index", [FieldViolation(aliases[0], f"missing (also looked for {aliases[1]!r})")])


def numeric_items(row: Mapping[str, Any]) -> Iterable[tuple[str, float, ValueKind]]:
    """The row's numeric fields: top-level keys merged with response.usage.

    docs/metrics.md#numeric-fields says which they are.

    usage keys win on a clash (as NeMo Gym's `row | usage`); keys starting with `_` and the
    mask flag are skipped; bool counts as 0/1; nested values never count.
    """
    for key, value, kind in row_items(row):
        if kind is not None:
            yield key, value, kind


def not_a_field(key: str) -> bool:
    """Keys that are never numeric fields: `_` bookkeeping, the indices, the mask flag."""
    return key.startswith("_") or key == MASK_KEY or key in TASK_KEY_ALIASES or key in ROLLOUT_KEY_ALIASES


def row_items(row: Mapping[str, Any]) -> Iterable[tuple[str, Any, ValueKind | None]]:
    """Every non-null value under a numeric-field name (docs/metrics.md#numeric-fields), numeric
    (with its kind) or not (kind None:
    a string, object or list, left out of the stats but counted when the key is numeric
    elsewhere). null is "missing", as in NeMo Gym, and is not yielded."""
    merged: Mapping[str, Any] = row
    response = row.get("response")
    if isinstance(response, Mapping):
        usage = response.get("usage")
        if isinstance(usage, Mapping) and usage:
            merged = {**row, **usage}
    for key, value in merged.items():
        if not_a_field(key):
            continue
        if isinstance(value, bool):
            yield key, float(value), ValueKind.BOOL
        elif isinstance(value, int):
            try:
                yield key, float(value), ValueKind.INT
            except OverflowError:  # past a float's range (309 digits and more): left out, as text is, kept exact
                yield key, value, None
        elif isinstance(value, float):
            yield key, value, ValueKind.FLOAT
        elif value is not None:
            yield key, value, None


__all__ = [
    "ERROR_KEY",
    "ERROR_KINDS",
    "MASK_KEY",
    "ROLLOUT_KEY",
    "ROLLOUT_KEY_ALIASES",
    "TASK_KEY",
    "TASK_KEY_ALIASES",
    "NumericField",
    "ValueKind",
    "error_code",
    "minimal_row",
    "not_a_field",
    "numeric_items",
    "row_index_value",
    "row_items",
    "shown_of_field",
]
