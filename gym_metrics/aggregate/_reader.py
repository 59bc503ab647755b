"""Read a rollouts JSONL file into one columnar batch per agent.

Fast path: polars reads the whole file column-wise (1M rows in well under a second). Anything
the fast path cannot prove it read exactly (a bad line, the NaN literal, mixed types in a
column, bad indices) sends the file down the per-line path, which is slower but names every
bad line.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import orjson

from gym_metrics.aggregate._columns import (
    MASK_KEY,
    ROLLOUT_KEY_ALIASES,
    TASK_KEY_ALIASES,
    BufferRows,
    NumericField,
    RolloutColumns,
    ValueKind,
    row_index_value,
)
from gym_metrics.errors import FieldViolation, InvalidInputError

OnBadLine = Literal["fail", "skip"]


@dataclass(frozen=True)
class BadLine:
    """A line that could not be used, and why."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


@dataclass
class RolloutFile:
    """A rollouts file read into columns, one batch per agent."""

    agents: dict[str, RolloutColumns]
    bad_lines: list[BadLine] = field(default_factory=list)
    rows_read: int = 0


def read_rollouts(path: str | Path, on_bad_line: OnBadLine = "fail") -> RolloutFile:
    """Read `path`; with on_bad_line="fail" any bad line raises InvalidInputError naming it."""
    buf = Path(path).read_bytes()
    starts, ends = _line_bounds(buf)
    result = _read_fast(buf, starts, ends)
    if result is None:
        result = _read_slow(buf, starts, ends)
    if result.bad_lines and on_bad_line == "fail":
        raise InvalidInputError(
            f"{path}: {len(result.bad_lines)} bad line(s)",
            [FieldViolation("line", b.reason, b.line) for b in result.bad_lines],
        )
    return result


def _line_bounds(buf: bytes) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of every line, blank lines included (line number = position + 1)."""
    newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
    starts = np.concatenate(([0], newlines + 1)).astype(np.int64)
    ends = np.concatenate((newlines, [len(buf)])).astype(np.int64)
    if len(buf) and buf.endswith(b"\n"):  # no phantom empty line after the final newline
        starts, ends = starts[:-1], ends[:-1]
    return starts, ends


def _nonblank(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Positions of lines with content; only short lines need a closer look."""
    lengths = ends - starts
    keep = lengths > 0
    for i in np.flatnonzero(keep & (lengths < 4)).tolist():
        keep[i] = bool(buf[starts[i] : ends[i]].strip())
    return np.flatnonzero(keep)


def _read_fast(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> RolloutFile | None:
    import polars as pl

    lines = _nonblank(buf, starts, ends)
    if len(lines) == 0:
        return RolloutFile({}, [], 0)
    try:
        df = pl.read_ndjson(io.BytesIO(buf), infer_schema_length=None)
    except Exception:
        return None
    if df.height != len(lines):
        return None
    schema = df.schema

    agent = _agent_names(df)
    tasks = _index_column(df, TASK_KEY_ALIASES)
    repeats = _index_column(df, ROLLOUT_KEY_ALIASES)
    if agent is None or tasks is None or repeats is None:
        return None
    masked = np.zeros(df.height, dtype=bool)
    if MASK_KEY in schema:
        dtype = schema[MASK_KEY]
        if dtype == pl.Boolean:
            masked = df[MASK_KEY].fill_null(False).to_numpy()
        elif dtype.is_numeric():
            masked = (df[MASK_KEY].fill_null(0) != 0).to_numpy()
        elif dtype != pl.Null:
            return None

    fields: dict[str, NumericField] = {}
    for name, dtype in schema.items():
        if name.startswith("_") or name == MASK_KEY or name in TASK_KEY_ALIASES or name in ROLLOUT_KEY_ALIASES:
            continue
        if dtype == pl.String and _has_number_like(df[name]):
            return None  # polars stringifies numbers in mixed columns: re-read exactly
        column = _numeric_field(df[name])
        if column is not None:
            fields[name] = column
    usage = _usage_fields(df)
    for name, column in usage.items():
        if name in fields:  # usage wins where it has a value (NeMo Gym's `row | usage`)
            base = fields[name]
            take = column.present
            values = np.where(take, column.values, base.values)
            kind = ValueKind.merge(base.kind, column.kind) if base.present.any() else column.kind
            column = NumericField(values, take | base.present, kind)
        fields[name] = column

    rows = BufferRows(buf, starts[lines], ends[lines])
    line_numbers = (lines + 1).astype(np.int64)
    return RolloutFile(_split_by_agent(agent, tasks, repeats, fields, masked, rows, line_numbers), [], df.height)


def _has_number_like(series: Any) -> bool:
    return bool(series.drop_nulls().str.contains(r"^\s*(-?\d|true$|false$)").any())


def _agent_names(df: Any) -> np.ndarray | None:
    import polars as pl

    dtype = df.schema.get("agent_ref")
    if not isinstance(dtype, pl.Struct) or "name" not in {f.name for f in dtype.fields}:
        return None
    names = df["agent_ref"].struct.field("name")
    if names.dtype != pl.String or names.null_count():
        return None
    return names.to_numpy()


def _index_column(df: Any, aliases: tuple[str, ...]) -> np.ndarray | None:
    """Coalesce the alias columns; None unless every row has a non-negative integer."""
    present = [a for a in aliases if a in df.schema]
    if not present:
        return None
    for a in present:
        if not df.schema[a].is_integer() and str(df.schema[a]) != "Null":
            return None
    import polars as pl

    col = pl.coalesce([pl.col(a).cast(pl.Int64) for a in present])
    values = df.select(col.alias("i"))["i"]
    if values.null_count() or (values < 0).any():
        return None
    return values.to_numpy().astype(np.int64, copy=False)


def _numeric_field(series: Any) -> NumericField | None:
    import polars as pl

    dtype = series.dtype
    if dtype == pl.Boolean:
        kind = ValueKind.BOOL
    elif dtype.is_integer():
        kind = ValueKind.INT
    elif dtype.is_float():
        kind = ValueKind.FLOAT
    else:
        return None
    present = series.is_not_null().to_numpy()
    values = series.cast(pl.Float64).fill_null(float("nan")).to_numpy()
    return NumericField(np.asarray(values, dtype=np.float64), np.asarray(present, dtype=bool), kind)


def _usage_fields(df: Any) -> dict[str, NumericField]:
    import polars as pl

    dtype = df.schema.get("response")
    if not isinstance(dtype, pl.Struct) or "usage" not in {f.name for f in dtype.fields}:
        return {}
    usage = df["response"].struct.field("usage")
    if not isinstance(usage.dtype, pl.Struct):
        return {}
    out = {}
    for f in usage.dtype.fields:
        if f.name.startswith("_"):
            continue
        column = _numeric_field(usage.struct.field(f.name))
        if column is not None:
            out[f.name] = column
    return out


def _split_by_agent(
    agent: np.ndarray,
    tasks: np.ndarray,
    repeats: np.ndarray,
    fields: dict[str, NumericField],
    masked: np.ndarray,
    rows: BufferRows,
    line_numbers: np.ndarray,
) -> dict[str, RolloutColumns]:
    names, inverse = np.unique(agent, return_inverse=True)
    out = {}
    for i, name in enumerate(names.tolist()):
        idx = np.flatnonzero(inverse == i)
        sub_fields = {k: v.take(idx) for k, v in fields.items()}
        sub_fields = {k: v for k, v in sub_fields.items() if v.present.any()}
        out[str(name)] = RolloutColumns(
            tasks[idx],
            repeats[idx],
            sub_fields,
            masked[idx],
            rows=_Subset(rows, idx),
            row_labels=line_numbers[idx],
        )
    return out


class _Subset:
    """Rows of a BufferRows at the given positions, parsed on access."""

    def __init__(self, rows: BufferRows, idx: np.ndarray) -> None:
        self._rows = rows
        self._idx = idx

    def __len__(self) -> int:
        return len(self._idx)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return _loads(self._rows[int(self._idx[i])])


def _loads(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)  # accepts NaN / Infinity, which Python writers emit


def _read_slow(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> RolloutFile:
    """Line by line: every bad line is named, good lines are kept."""
    by_agent: dict[str, list[tuple[int, dict[str, Any], int]]] = defaultdict(list)
    bad: list[BadLine] = []
    rows_read = 0
    for pos in _nonblank(buf, starts, ends).tolist():
        line_no = pos + 1
        raw = buf[starts[pos] : ends[pos]]
        try:
            row = _loads(raw)
        except ValueError as exc:
            bad.append(BadLine(line_no, f"invalid JSON ({exc})"))
            continue
        problem = _row_problem(row)
        if problem:
            bad.append(BadLine(line_no, problem))
            continue
        rows_read += 1
        by_agent[row["agent_ref"]["name"]].append((line_no, row, pos))
    agents = {}
    for name in sorted(by_agent):
        entries = by_agent[name]
        cols = RolloutColumns.from_rows([e[1] for e in entries], labels=[e[0] for e in entries], keep_rows=False)
        positions = np.array([e[2] for e in entries], dtype=np.int64)
        cols.rows = _Subset(BufferRows(buf, starts, ends), positions)  # re-parse on access, keep no dicts
        agents[name] = cols
    return RolloutFile(agents, bad, rows_read)


def _row_problem(row: Any) -> str | None:
    if not isinstance(row, Mapping):
        return f"expected a JSON object, got {type(row).__name__}"
    ref = row.get("agent_ref")
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str):
        return "agent_ref.name: missing or not a string (every rollout must name its agent)"
    for aliases in (TASK_KEY_ALIASES, ROLLOUT_KEY_ALIASES):
        try:
            row_index_value(row, aliases)
        except InvalidInputError as exc:
            return str(exc.violations[0])
    return None
