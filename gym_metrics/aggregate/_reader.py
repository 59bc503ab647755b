"""Read a rollouts JSONL file into one columnar batch per agent.

Fast path: pyarrow reads the whole file column-wise (1M rows in well under a second). Anything
the fast path cannot prove it read exactly (a bad line, the NaN literal, mixed types in a
column, bad indices) sends the file down the per-line path, which is slower but names every
bad line.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from gym_metrics.aggregate._columns import (
    ERROR_KEY,
    MASK_KEY,
    ROLLOUT_KEY_ALIASES,
    TASK_KEY_ALIASES,
    BufferRows,
    NumericField,
    RolloutColumns,
    RowSource,
    concat,
    error_code,
    parse_row,
    ValueKind,
    row_index_value,
)
from gym_metrics.errors import FieldViolation, InvalidInputError

OnBadLine = Literal["fail", "skip"]


@dataclass(frozen=True)
class BadLine:
    """A line that could not be used: which field was wrong, and why."""

    line: int
    field: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.reason}"


@dataclass
class RolloutFile:
    """A rollouts file read into columns, one batch per agent."""

    agents: dict[str, RolloutColumns]
    bad_lines: list[BadLine] = field(default_factory=list)
    rows_read: int = 0


CHUNK_BYTES = 16 << 20
"""Lines are parsed this many bytes at a time: the parser's scratch memory stays bounded, and a
bad line sends only its own chunk down the per-line path."""


def read_rollouts(path: str | Path, on_bad_line: OnBadLine = "fail") -> RolloutFile:
    """Read `path`; with on_bad_line="fail" any bad line raises InvalidInputError naming it."""
    buf = Path(path).read_bytes()
    starts, ends = _line_bounds(buf)
    lines = BufferRows(buf, starts, ends)
    parts: dict[str, list[RolloutColumns]] = defaultdict(list)
    result = RolloutFile({}, [], 0)
    for lo, hi in _chunk_ranges(starts, CHUNK_BYTES):
        part = _read_fast(buf, lines, lo, hi) or _read_slow(buf, lines, lo, hi)
        for name, cols in part.agents.items():
            parts[name].append(cols)
        result.bad_lines += part.bad_lines
        result.rows_read += part.rows_read
    result.agents = {name: concat(parts[name]) for name in sorted(parts)}
    if result.bad_lines and on_bad_line == "fail":
        raise InvalidInputError(
            f"{path}: {len(result.bad_lines)} bad line(s)",
            [FieldViolation(b.field, b.reason, b.line, row_name="line") for b in result.bad_lines],
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


def _chunk_ranges(starts: np.ndarray, size: int) -> list[tuple[int, int]]:
    """[lo, hi) line ranges of about `size` bytes each."""
    if not len(starts):
        return []
    cuts = np.searchsorted(starts, np.arange(size, int(starts[-1]) + 1, size))
    bounds = np.unique(np.concatenate(([0], cuts, [len(starts)])))
    return list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))


def _nonblank(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Positions of lines with content; only short lines need a closer look."""
    lengths = ends - starts
    keep = lengths > 0
    for i in np.flatnonzero(keep & (lengths < 4)).tolist():
        keep[i] = bool(buf[starts[i] : ends[i]].strip())
    return np.flatnonzero(keep)


def _read_fast(buf: bytes, all_lines: BufferRows, lo: int, hi: int) -> RolloutFile | None:
    """Lines lo..hi column-wise; None when that cannot be exact (then they go line by line)."""
    parsed = parse_lines(buf, all_lines, lo, hi)
    if parsed is None:
        return None
    table, lines = parsed
    if not len(lines):
        return RolloutFile({}, [], 0)
    agents = columns_from_table(table, all_lines, lines)
    return RolloutFile(agents, [], table.num_rows) if agents is not None else None


def parse_lines(buf: bytes, all_lines: BufferRows, lo: int, hi: int) -> tuple[Any, np.ndarray] | None:
    """(pyarrow table, file line index of each row) of lines lo..hi; None when a line does not
    parse or a column changes type (pyarrow refuses it: nothing is silently coerced)."""
    import pyarrow as pa
    import pyarrow.json as pj

    starts, ends = all_lines.starts, all_lines.ends
    lines = lo + _nonblank(buf, starts[lo:hi], ends[lo:hi])
    if len(lines) == 0:
        return pa.table({}), lines
    first, stop = int(starts[lo]), int(ends[hi - 1])
    try:
        text = pa.py_buffer(buf).slice(first, stop - first)
        table = pj.read_json(pa.BufferReader(text), read_options=pj.ReadOptions(block_size=4 << 20))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return (table, lines) if table.num_rows == len(lines) else None


def columns_from_table(table: Any, all_lines: BufferRows, lines: np.ndarray) -> dict[str, RolloutColumns] | None:
    """Per-agent columns of parsed rows (SPEC A1); None unless every row can be read exactly."""
    import pyarrow as pa

    columns = dict(zip(table.column_names, table.columns))

    agent = _agent_codes(columns.get("agent_ref"))
    tasks = _index_column(columns, TASK_KEY_ALIASES)
    repeats = _index_column(columns, ROLLOUT_KEY_ALIASES)
    if agent is None or tasks is None or repeats is None:
        return None
    masked = np.zeros(table.num_rows, dtype=bool)
    if MASK_KEY in columns:
        flag = _numeric_field(columns[MASK_KEY])
        if flag is None and not pa.types.is_null(columns[MASK_KEY].type):
            return None
        if flag is not None:
            masked = flag.present & (np.nan_to_num(flag.values) != 0)

    errors = None
    if ERROR_KEY in columns:
        errors = _error_codes(columns[ERROR_KEY])
        if errors is None:
            return None

    fields: dict[str, NumericField] = {}
    for name, column in columns.items():
        if name.startswith("_") or name == MASK_KEY or name in TASK_KEY_ALIASES or name in ROLLOUT_KEY_ALIASES:
            continue
        field_ = _numeric_field(column)
        if field_ is not None:
            fields[name] = field_
    if _usage_clash_is_ambiguous(columns.get("response"), fields):
        return None
    for name, column in _usage_fields(columns.get("response")).items():
        if name in fields:  # usage wins where it has a value (NeMo Gym's `row | usage`)
            base = fields[name]
            values = np.where(column.present, column.values, base.values)
            kind = ValueKind.merge(base.kind, column.kind) if base.present.any() else column.kind
            column = NumericField(values, column.present | base.present, kind)
        fields[name] = column

    return _split_by_agent(agent, tasks, repeats, fields, masked, all_lines, lines, errors)


def _error_codes(column: Any) -> np.ndarray | None:
    """Codes from the `_gm_error.kind` strings (0 where the rollout was verified)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_null(column.type):
        return np.zeros(len(column), np.int8)
    if not pa.types.is_struct(column.type) or column.type.get_field_index("kind") < 0:
        return None
    kinds = pc.struct_field(column, "kind")
    if not (pa.types.is_string(kinds.type) or pa.types.is_null(kinds.type)):
        return None
    failed = pc.is_valid(column).to_numpy(zero_copy_only=False)
    codes = np.zeros(len(column), np.int8)
    for i in np.flatnonzero(failed).tolist():
        codes[i] = error_code(kinds[i].as_py())
    return codes


def _agent_codes(column: Any) -> tuple[list[str], np.ndarray] | None:
    """(agent names, code per row) from agent_ref.name; None unless every row names one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if column is None or not pa.types.is_struct(column.type) or column.type.get_field_index("name") < 0:
        return None
    names = pc.struct_field(column, "name")
    if not pa.types.is_string(names.type) or names.null_count:
        return None
    encoded = pc.dictionary_encode(names).combine_chunks()
    return [str(x) for x in encoded.dictionary.to_pylist()], encoded.indices.to_numpy(zero_copy_only=False)


def _index_column(columns: dict[str, Any], aliases: tuple[str, ...]) -> np.ndarray | None:
    """Coalesce the alias columns; None unless every row has a non-negative integer."""
    import pyarrow as pa
    import pyarrow.compute as pc

    present = [columns[a] for a in aliases if a in columns]
    if not present or not all(pa.types.is_integer(c.type) or pa.types.is_null(c.type) for c in present):
        return None
    values = pc.coalesce(*[pc.cast(c, pa.int64()) for c in present]) if len(present) > 1 else present[0]
    if values.null_count or pa.types.is_null(values.type) or pc.min(values).as_py() < 0:
        return None
    return values.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _numeric_field(column: Any) -> NumericField | None:
    import pyarrow as pa
    import pyarrow.compute as pc

    dtype = column.type
    if pa.types.is_boolean(dtype):
        kind = ValueKind.BOOL
    elif pa.types.is_integer(dtype):
        kind = ValueKind.INT
    elif pa.types.is_floating(dtype):
        kind = ValueKind.FLOAT
    else:
        return None
    present = pc.is_valid(column).to_numpy(zero_copy_only=False)
    values = pc.fill_null(pc.cast(column, pa.float64()), float("nan")).to_numpy(zero_copy_only=False)
    return NumericField(np.asarray(values, dtype=np.float64), np.asarray(present, dtype=bool), kind)


def _usage_fields(response: Any) -> dict[str, NumericField]:
    import pyarrow as pa
    import pyarrow.compute as pc

    if response is None or not pa.types.is_struct(response.type) or response.type.get_field_index("usage") < 0:
        return {}
    usage = pc.struct_field(response, "usage")
    if not pa.types.is_struct(usage.type):
        return {}
    out = {}
    for i in range(usage.type.num_fields):
        name = usage.type.field(i).name
        if name.startswith("_"):
            continue
        field_ = _numeric_field(pc.struct_field(usage, name))
        if field_ is not None:
            out[name] = field_
    return out


def _usage_clash_is_ambiguous(response: Any, fields: dict[str, NumericField]) -> bool:
    """Whether some row has a top-level numeric field that its usage object names without a number.

    `row | usage` then replaces the row's value with the usage's null (or string, ...), so the
    field is absent for that row; but a struct column cannot tell "usage has the key, null" from
    "usage lacks the key" (the row's value stands). The per-line reader can.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if response is None or not pa.types.is_struct(response.type) or response.type.get_field_index("usage") < 0:
        return False
    usage = pc.struct_field(response, "usage")
    if not pa.types.is_struct(usage.type):
        return False
    has_usage = None
    for i in range(usage.type.num_fields):
        name = usage.type.field(i).name
        if name not in fields:
            continue
        if has_usage is None:
            has_usage = pc.is_valid(usage).to_numpy(zero_copy_only=False)
        value = _numeric_field(pc.struct_field(usage, name))
        usage_number = value.present if value is not None else np.zeros(len(has_usage), dtype=bool)
        if (has_usage & fields[name].present & ~usage_number).any():
            return True
    return False


def _split_by_agent(
    agent: tuple[list[str], np.ndarray],
    tasks: np.ndarray,
    repeats: np.ndarray,
    fields: dict[str, NumericField],
    masked: np.ndarray,
    all_lines: BufferRows,
    lines: np.ndarray,
    errors: np.ndarray | None,
) -> dict[str, RolloutColumns]:
    """`lines`: the file line index (0-based) of each row."""
    names, codes = agent
    out = {}
    for i, name in sorted(enumerate(names), key=lambda x: x[1]):
        idx = np.flatnonzero(codes == i)
        sub_fields = {k: v.take(idx) for k, v in fields.items()}
        sub_fields = {k: v for k, v in sub_fields.items() if v.present.any()}
        out[str(name)] = RolloutColumns(
            tasks[idx],
            repeats[idx],
            sub_fields,
            masked[idx],
            rows=RowSource(all_lines, lines[idx]),
            row_labels=lines[idx] + 1,
            label_name="line",
            errors=errors[idx] if errors is not None and errors[idx].any() else None,
        )
    return out


def _read_slow(buf: bytes, all_lines: BufferRows, lo: int, hi: int) -> RolloutFile:
    """Lines lo..hi one by one: every bad line is named, good lines are kept."""
    starts, ends = all_lines.starts, all_lines.ends
    by_agent: dict[str, list[tuple[int, dict[str, Any], int]]] = defaultdict(list)
    bad: list[BadLine] = []
    rows_read = 0
    for pos in (lo + _nonblank(buf, starts[lo:hi], ends[lo:hi])).tolist():
        line_no = pos + 1
        raw = buf[starts[pos] : ends[pos]]
        try:
            row = parse_row(raw)
        except ValueError as exc:
            bad.append(BadLine(line_no, "json", f"not valid JSON ({exc})"))
            continue
        problem = _row_problem(row)
        if problem:
            bad.append(BadLine(line_no, *problem))
            continue
        rows_read += 1
        by_agent[row["agent_ref"]["name"]].append((line_no, row, pos))
    agents = {}
    for name in sorted(by_agent):
        entries = by_agent[name]
        cols = RolloutColumns.from_rows([e[1] for e in entries], labels=[e[0] for e in entries], keep_rows=False)
        positions = np.array([e[2] for e in entries], dtype=np.int64)
        cols.rows = RowSource(all_lines, positions)  # re-parse on access, keep no dicts
        cols.label_name = "line"
        agents[name] = cols
    return RolloutFile(agents, bad, rows_read)


def _row_problem(row: Any) -> tuple[str, str] | None:
    """(field, reason) when the row cannot be aggregated."""
    if not isinstance(row, Mapping):
        return "row", f"expected a JSON object, got {type(row).__name__}"
    ref = row.get("agent_ref")
    if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str):
        return "agent_ref.name", "missing or not a string (every rollout must name its agent)"
    for aliases in (TASK_KEY_ALIASES, ROLLOUT_KEY_ALIASES):
        try:
            row_index_value(row, aliases)
        except InvalidInputError as exc:
            return exc.violations[0].field, exc.violations[0].description
    return None
