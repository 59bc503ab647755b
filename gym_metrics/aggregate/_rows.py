"""Full rows for the few places that need them: compute_metrics and each task's sample."""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from gym_metrics._util.jsonio import dumps_finite
from gym_metrics.aggregate._canonical import sample_texts_of
from gym_metrics.rollouts import (
    RECORDING_KEYS,
    ROLLOUT_KEY,
    ROLLOUT_KEY_ALIASES,
    TASK_KEY,
    TASK_KEY_ALIASES,
    RolloutColumns,
    RowParseError,
    ValueKind,
    minimal_row,
)
from gym_metrics.errors import FieldViolation, InvalidInputError


def rows_by_task(
    data: RolloutColumns, measured_pos: np.ndarray, starts: np.ndarray, names: list[str]
) -> list[list[dict[str, Any]]]:
    """Full measured rows per task (tasks and rollouts ascending), rebuilt when rows are absent."""
    bounds = np.append(starts, len(measured_pos)).tolist()
    flat = _column_rows(data, measured_pos, names) if data.rows is None else None
    if flat is not None:
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        out.append(load_rows(data, measured_pos[a:b].tolist(), names))
    return out


def load_rows(
    data: RolloutColumns, positions: list[int], names: list[str], with_indices: bool = True
) -> list[dict[str, Any]]:
    """Full rows at `positions` (with their indices unless told not to bother); rows that were
    not sent are rebuilt from their numeric fields."""
    if data.rows is None:
        return [_minimal_row(data, pos, names) for pos in positions]
    try:
        loaded = data.rows.load(positions)
    except RowParseError as exc:
        raise InvalidInputError(
            "invalid row", [FieldViolation("row_json", exc.reason, data.label(exc.position), data.label_name)]
        ) from None
    out = []
    for pos, row in zip(positions, loaded):
        if row is None:
            out.append(_minimal_row(data, pos, names))
            continue
        if not with_indices:
            out.append(row)
            continue
        if all(row.get(k) is None for k in TASK_KEY_ALIASES):
            row[TASK_KEY] = int(data.task_index[pos])
        if all(row.get(k) is None for k in ROLLOUT_KEY_ALIASES):
            row[ROLLOUT_KEY] = int(data.rollout_index[pos])
        out.append(row)
    return out


def _minimal_row(data: RolloutColumns, pos: int, names: list[str]) -> dict[str, Any]:
    fields = {k: data.fields[k] for k in names}
    return minimal_row(fields, pos, int(data.task_index[pos]), int(data.rollout_index[pos]))


def sample_texts(data: RolloutColumns, positions: list[int], names: list[str]) -> list[bytes]:
    """Rows at `positions` as JSON text without their indices and recording (RECORDING_KEYS),
    parsed a slice at a time so the dicts never pile up."""
    if data.rows is None:
        fast = _column_sample_texts(data, positions, names)
        if fast is not None:
            return fast
    out: list[bytes] = []
    for lo in range(0, len(positions), 8192):
        part = positions[lo : lo + 8192]
        texts: list[bytes | None] = [None] * len(part)
        if data.rows is not None:
            texts = sample_texts_of(data.rows.raws(part))
        todo = [i for i, text in enumerate(texts) if text is None]
        for i, row in zip(todo, load_rows(data, [part[i] for i in todo], names, with_indices=False) if todo else []):
            for key in (TASK_KEY, ROLLOUT_KEY, *RECORDING_KEYS):
                row.pop(key, None)
            # copied to an exact-size object: orjson's result keeps a ~4 KB block alive
            texts[i] = memoryview(dumps_finite(row)).tobytes()  # (an integer past 64 bits kept, as NeMo Gym's json writes it)
        out += texts  # type: ignore[arg-type]  # (every None was filled)
    return out


def _column_values(data: RolloutColumns, pos: np.ndarray, names: list[str]) -> list[list[Any]] | None:
    """Each field's values at `pos` as the Python values `minimal_row` makes (bool, int,
    float), one list per field; None when some value is missing or an INT column cannot be
    an int64 (NaN, or beyond 2**63): those rows take the general path."""
    values: list[list[Any]] = []
    for name in names:
        col = data.fields[name]
        if not col.present[pos].all():
            return None
        v = col.values[pos]
        if col.kind is ValueKind.BOOL:
            values.append((v != 0).tolist())
        elif col.kind is ValueKind.INT:
            if np.isnan(v).any() or (len(v) and np.abs(v).max() >= 2.0**63):
                return None
            values.append(v.astype(np.int64).tolist())
        else:
            values.append(v.tolist())
    return values


def _column_rows(data: RolloutColumns, positions: np.ndarray, names: list[str]) -> list[dict[str, Any]] | None:
    """The rows `minimal_row` rebuilds, made a column at a time (no per-row field lookups)."""
    pos = np.asarray(positions, dtype=np.int64)
    values = _column_values(data, pos, names)
    if values is None:
        return None
    keys = (TASK_KEY, ROLLOUT_KEY, *names)
    columns = (data.task_index[pos].tolist(), data.rollout_index[pos].tolist(), *values)
    return [dict(zip(keys, row)) for row in zip(*columns)]


def _column_sample_texts(data: RolloutColumns, positions: list[int], names: list[str]) -> list[bytes] | None:
    """Samples of rows known only by their numeric columns, written column by column: the same
    bytes as dumping `minimal_row` without indices, with no dict per row (a million tasks of
    one rollout each made this the engine's hottest loop)."""
    pos = np.asarray(positions, dtype=np.int64)
    values = _column_values(data, pos, names)
    if values is None:
        return None
    if not names:
        return [b"{}"] * len(pos)
    texts = [orjson.dumps(items)[1:-1].split(b",") if items else [] for items in values]
    keys = [orjson.dumps(name) + b":" for name in names]
    template = b"{" + b",".join(key + b"%b" for key in keys) + b"}"
    return [template % row for row in zip(*texts)]
