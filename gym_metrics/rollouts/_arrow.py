"""The columnar fast path of the rollouts reader: pyarrow parses a chunk of lines at once and
the numeric fields (docs/metrics.md#numeric-fields), indices, agents, masks and failures come
out as numpy columns.

Every function answers None (or refuses) when it cannot prove the columns exact; the caller
then reads the lines one by one.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from gym_metrics.rollouts._columns import (
    ERROR_KEY,
    MASK_KEY,
    ROLLOUT_KEY_ALIASES,
    TASK_KEY_ALIASES,
    BufferRows,
    NumericField,
    RolloutColumns,
    RowSource,
    ValueKind,
    ShownField,
    error_code,
    take_non_numeric,
    take_shown,
)
from gym_metrics.rollouts._arrow_text import Text, exactly_typed, reward_readable, shown_clash, shown_reward


_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\r\x0b\x0c")] = True
"""The bytes `bytes.strip()` removes (newline aside: lines end before it)."""


def _nonblank(buf: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Positions of lines with content: a line that opens with a space byte gets a closer look
    (an object line opens with `{`; a blank one of any length is skipped, as NeMo Gym skips it)."""
    keep = ends > starts
    if not keep.any():
        return np.flatnonzero(keep)
    first = np.frombuffer(buf, dtype=np.uint8)[np.minimum(starts, max(len(buf) - 1, 0))]
    for i in np.flatnonzero(keep & _SPACE[first]).tolist():
        keep[i] = bool(buf[starts[i] : ends[i]].strip())
    return np.flatnonzero(keep)


MAX_ARROW_DEPTH = 1024
"""Lines nested deeper are not handed to pyarrow: its reader recurses per level and a line
some 10,000 deep crashes the process. They go line by line, where orjson refuses past 1,024."""

_OPENS = np.zeros(256, bool)
_OPENS[[ord("["), ord("{")]] = True


def too_deep(buf: bytes, starts: np.ndarray, ends: np.ndarray, limit: int | None = None) -> bool:
    """Whether a line may nest arrays and objects deeper than `limit` (MAX_ARROW_DEPTH): exactly in C
    (`jsonscan`, built on install: brackets outside strings); without it, whether a line holds
    more opening brackets than that (never no for a deep line; yes for some that are not,
    which are then read line by line, slower)."""
    limit = MAX_ARROW_DEPTH if limit is None else limit
    if not len(starts):
        return False
    try:
        from gym_metrics._util.jsonscan import too_deep as native
    except ImportError:
        pass
    else:
        return native(buf, int(starts[0]), int(ends[-1]), limit)
    arr = np.frombuffer(buf, dtype=np.uint8)
    for i in np.flatnonzero(ends - starts > limit).tolist():
        if int(np.count_nonzero(_OPENS[arr[starts[i] : ends[i]]])) > limit:
            return True
    return False


def parse_lines(buf: bytes, all_lines: BufferRows, lo: int, hi: int) -> tuple[Any, np.ndarray] | None:
    """(pyarrow table, file line index of each row) of lines lo..hi; None when a line does not
    parse, is not UTF-8 (pyarrow reads such bytes without complaint; a full validation finds
    them) or a column changes type (pyarrow refuses it: nothing is silently coerced)."""
    import pyarrow as pa
    import pyarrow.json as pj

    starts, ends = all_lines.starts, all_lines.ends
    lines = lo + _nonblank(buf, starts[lo:hi], ends[lo:hi])
    if len(lines) == 0:
        return pa.table({}), lines
    first, stop = int(starts[lo]), int(ends[hi - 1])
    if too_deep(buf, starts[lo:hi], ends[lo:hi]):
        return None
    try:
        text = pa.py_buffer(buf).slice(first, stop - first)
        # pyarrow-stubs type input_file as a path or typing.IO; a NativeFile is what pyarrow reads fastest
        # the system allocator: its freed chunks go back to the OS (release_memory), where
        # pyarrow's own pool keeps each chunk's peak for the rest of the run
        table = pj.read_json(
            pa.BufferReader(text),  # type: ignore[arg-type]
            read_options=pj.ReadOptions(block_size=4 << 20),
            memory_pool=pa.system_memory_pool(),
        )
        table.validate(full=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    return (table, lines) if table.num_rows == len(lines) else None


def columns_from_table(
    table: Any, all_lines: BufferRows, lines: np.ndarray, default_agent: str | None = None
) -> dict[str, RolloutColumns] | None:
    """Per-agent columns of parsed rows (docs/metrics.md#numeric-fields); None unless every row
    can be read exactly.
    `default_agent` names the rows that have no agent_ref.name."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = dict(zip(table.column_names, table.columns))

    agent = agent_codes(columns.get("agent_ref"), default_agent, table.num_rows)
    tasks = _index_column(columns, TASK_KEY_ALIASES)
    repeats = _index_column(columns, ROLLOUT_KEY_ALIASES)
    if agent is None or tasks is None or repeats is None:
        return None
    masked = np.zeros(table.num_rows, dtype=bool)
    if MASK_KEY in columns:
        flag = arrow_numeric_field(columns[MASK_KEY])
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
    other: dict[str, np.ndarray] = {}
    for name, column in columns.items():
        if name.startswith("_") or name == MASK_KEY or name in TASK_KEY_ALIASES or name in ROLLOUT_KEY_ALIASES:
            continue
        field_ = arrow_numeric_field(column)
        if field_ is not None:
            fields[name] = field_
        elif not pa.types.is_null(column.type):
            valid = pc.is_valid(cast("pa.ChunkedArray[Any]", column))  # a column: `table` is untyped
            other[name] = valid.to_numpy(zero_copy_only=False)
    if _usage_clash_is_ambiguous(columns.get("response"), fields, other):
        return None
    usage = _usage_fields(columns.get("response"))
    text = Text(all_lines, lines)
    if not exactly_typed(text, fields, usage) or not reward_readable(text, columns, usage):
        return None
    shown = shown_reward(fields.get("reward"))
    _merge_usage(fields, other, shown, usage, _usage_non_numeric(columns.get("response")))
    return _split_by_agent(agent, tasks, repeats, fields, masked, all_lines, lines, errors, other, shown)


def _merge_usage(
    fields: dict[str, NumericField],
    other: dict[str, np.ndarray],
    shown: dict[str, ShownField],
    usage: dict[str, NumericField],
    usage_other: dict[str, np.ndarray],
) -> None:
    """The usage columns into the row's (in place): usage wins where it has a value (NeMo Gym's
    `row | usage`), while rollout_infos show the row's own number (a shown column)."""
    for name, column in usage.items():
        if name in fields:
            base = fields[name]
            shown[name] = shown_clash(base, column)
            values = np.where(column.present, column.values, base.values)
            used = base.present & ~column.present
            kind = ValueKind.merge(base.kind, column.kind) if used.any() else column.kind
            column = NumericField(values, column.present | base.present, kind)
        fields[name] = column
        if name in other:  # the usage number replaces the row's text
            other[name] = other[name] & ~column.present
    for name, mask in usage_other.items():
        other[name] = other[name] | mask if name in other else mask


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


def agent_codes(column: Any, default_agent: str | None = None, rows: int = 0) -> tuple[list[str], np.ndarray] | None:
    """(agent names, code per row) from agent_ref.name; None unless every row names one (or
    `default_agent` names the rows without an agent_ref.name; `rows`: how many rows there are,
    for a table without the column)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if default_agent is not None and (column is None or pa.types.is_null(column.type)):
        return [default_agent], np.zeros(rows if column is None else len(column), dtype=np.int32)
    if column is None or not pa.types.is_struct(column.type):
        return None
    if column.type.get_field_index("name") < 0:
        if default_agent is None:
            return None
        return [default_agent], np.zeros(len(column), dtype=np.int32)
    names = pc.struct_field(column, "name")
    if names.null_count and default_agent is not None and (pa.types.is_string(names.type) or pa.types.is_null(names.type)):
        names = pc.fill_null(pc.cast(names, pa.string()), default_agent)
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


def _is_numeric_type(dtype: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_boolean(dtype) or pa.types.is_integer(dtype) or pa.types.is_floating(dtype))


def arrow_numeric_field(column: Any) -> NumericField | None:
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
    # unsafe: an int beyond 2**53 becomes the nearest double (pyarrow refuses it otherwise); the
    # stats take it so, and rollout_infos show the row's own digits (_exactly_typed)
    values = pc.fill_null(pc.cast(column, pa.float64(), safe=False), float("nan")).to_numpy(zero_copy_only=False)
    return NumericField(np.asarray(values, dtype=np.float64), np.asarray(present, dtype=bool), kind)


def _usage_columns(response: Any) -> list[tuple[Any, Any]]:
    """(field, column) of each `response.usage` key not starting with "_" ([] without usage)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if response is None or not pa.types.is_struct(response.type) or response.type.get_field_index("usage") < 0:
        return []
    usage = pc.struct_field(response, "usage")
    if not pa.types.is_struct(usage.type):
        return []
    fields = (usage.type.field(i) for i in range(usage.type.num_fields))
    return [(f, pc.struct_field(usage, f.name)) for f in fields if not f.name.startswith("_")]


def _usage_fields(response: Any) -> dict[str, NumericField]:
    out = {}
    for f, column in _usage_columns(response):
        field_ = arrow_numeric_field(column)
        if field_ is not None:
            out[f.name] = field_
    return out


def _usage_non_numeric(response: Any) -> dict[str, np.ndarray]:
    """Per usage key held as text, object or list: the rows where it is (they win `row | usage`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return {
        f.name: pc.is_valid(column).to_numpy(zero_copy_only=False)
        for f, column in _usage_columns(response)
        if not (pa.types.is_null(f.type) or _is_numeric_type(f.type))
    }


def _usage_clash_is_ambiguous(
    response: Any, fields: dict[str, NumericField], other: dict[str, np.ndarray] | None = None
) -> bool:
    """Whether some row has a top-level value (a number, or text / object / list in `other`)
    under a name its usage object holds without a number.

    `row | usage` then replaces the row's value with the usage's null (or string, ...), so the
    field is absent (or non-numeric) for that row; but a struct column cannot tell "usage has
    the key, null" from "usage lacks the key" (the row's value stands). The per-line reader can.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if response is None or not pa.types.is_struct(response.type) or response.type.get_field_index("usage") < 0:
        return False
    usage = pc.struct_field(response, "usage")
    if not pa.types.is_struct(usage.type):
        return False
    has_usage = None
    other = other or {}
    for i in range(usage.type.num_fields):
        name = usage.type.field(i).name
        if name not in fields and name not in other:
            continue
        if has_usage is None:
            has_usage = pc.is_valid(usage).to_numpy(zero_copy_only=False)
        value = arrow_numeric_field(pc.struct_field(usage, name))
        usage_number = value.present if value is not None else np.zeros(len(has_usage), dtype=bool)
        top = fields[name].present if name in fields else np.zeros(len(has_usage), dtype=bool)
        if name in other:
            top = top | other[name]
        if (has_usage & top & ~usage_number).any():
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
    other: dict[str, np.ndarray] | None = None,
    shown: dict[str, ShownField] | None = None,
) -> dict[str, RolloutColumns]:
    """`lines`: the file line index (0-based) of each row; `other`: non-numeric values per key."""
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
            non_numeric=take_non_numeric(other, idx),
            shown=take_shown(shown, idx),
        )
    return out
