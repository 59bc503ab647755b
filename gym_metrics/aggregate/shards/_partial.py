"""Partial states: the rows one process read, as columns in a Parquet file, so that shards of
a rollouts set read anywhere (other processes, other machines, Ray tasks) merge into exactly
the metrics file one process would write.

A partial holds each agent's columns as the reader made them (keys, numeric fields with their
JSON kinds, masks, error kinds, non-numeric flags, shown values), and of the row text only each
task's sample candidates (or every row, for a row-dict `compute_metrics`); not the line numbers
(a merged set's errors name tasks and rollouts, not lines of shards). Merging concatenates
the partials' columns and runs the one aggregation engine: the engine orders rows by (task,
rollout) and sums in that order, so the split (by task, by line range, uneven, empty shards)
cannot change a byte of the result. Parquet, so other tools (polars, Ray, DuckDB) can read it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import pyarrow as pa

from gym_metrics._util.atomic import written_atomically
from gym_metrics.rollouts import (
    NumericField,
    RolloutColumns,
    RowSource,
    ShownField,
    ValueKind,
    concat,
    concat_shown,
    merge_kinds,
    shown_of_field,
)
from gym_metrics.rollouts import BadLine, RolloutFile, perf_blocks
from gym_metrics.aggregate.shards._partial_header import FORMAT, META_KEY, VERSION, bad_header, checked_header, header_bad_lines, sourced_bad_lines
from gym_metrics.aggregate.shards._partial_rows import PartialRows, row_groups
from gym_metrics.aggregate.shards._repeated_keys import refuse_files_given_twice, refuse_repeated_keys
from gym_metrics.rollouts import ERROR_KINDS
from gym_metrics._util.memory import trim_heap
from gym_metrics.errors import FieldViolation, InvalidInputError

if TYPE_CHECKING:  # imported where used: pyarrow.parquet costs ~20 ms of every command's start-up
    import pyarrow.parquet as pq


def write_partial(path: str | os.PathLike[str], rollouts: RolloutFile, sources: Sequence[str] = ()) -> Path:
    """Write `rollouts` (as `read_rollouts` returns it) to `path`, atomically."""
    path = Path(path)
    with written_atomically(path) as tmp:
        _write(str(tmp), rollouts, sources)
    return path


def partial_bytes(rollouts: RolloutFile, sources: Sequence[str] = ()) -> bytes:
    """The partial file's bytes (to send from a worker process or machine to the merge)."""
    sink = pa.BufferOutputStream()
    _write(sink, rollouts, sources)
    return bytes(sink.getvalue())


def _write(sink: Any, rollouts: RolloutFile, sources: Sequence[str]) -> None:
    agents, tables = [], []
    for name in sorted(rollouts.agents):
        table, meta = _agent_table(rollouts.agents[name])
        agents.append({"name": name, "rows": table.num_rows, **meta})
        tables.append(table)
    header = {"format": FORMAT, "version": VERSION, "agents": agents, "rows_read": rollouts.rows_read,
              "bad_lines": sourced_bad_lines(rollouts, sources), "sources": list(sources)}  # fmt: skip
    if blocks := perf_blocks(rollouts):  # the rows' ng_perf blocks: the columns do not hold them
        header["perf"] = blocks
    schema = _unified_schema(tables).with_metadata({META_KEY: orjson.dumps(header)})
    # lz4 and no column statistics: faster to write and to read than zstd, for ~30% more bytes
    # (nothing reads the statistics: the merge reads every value)
    import pyarrow.parquet as pq

    # (page checksums: a partial damaged in a copy is refused, not merged into other numbers)
    with pq.ParquetWriter(sink, schema, compression="lz4", write_statistics=False, write_page_checksum=True) as writer:
        for table in tables:
            if table.num_rows:
                writer.write_table(_conform(table, schema), row_group_size=_GROUP_ROWS)


_GROUP_ROWS = 1 << 20
"""Rows per Parquet row group (readers stream a partial a group at a time)."""


def _agent_table(cols: RolloutColumns) -> tuple[pa.Table, dict[str, Any]]:
    """One agent's columns as an Arrow table, and what the table cannot say (kinds, which
    optional columns it has)."""
    n = len(cols)
    data: dict[str, Any] = {"task_index": cols.task_index.astype(np.int64), "rollout_index": cols.rollout_index.astype(np.int64),
                            "masked": cols.masked}  # fmt: skip
    if cols.errors is not None:
        data["error"] = cols.errors.astype(np.int8)
    for name, field in cols.fields.items():
        data[f"value:{name}"], data[f"present:{name}"] = field.values, field.present
    for name, flags in (cols.non_numeric or {}).items():
        data[f"non_numeric:{name}"] = flags
    for name, shown in (cols.shown or {}).items():
        data[f"shown_values:{name}"], data[f"shown_present:{name}"], data[f"shown_ints:{name}"] = shown.values, shown.present, shown.ints
        if shown.text is not None:
            data[f"shown_text:{name}"] = pa.array(shown.text.tolist(), pa.binary())
    rows = "none"
    if cols.rows is not None:
        kept = cols.rows.kept_positions()
        rows = "all" if len(kept) == n else "samples"
        texts: list[bytes | None] = [None] * n
        for pos, raw in zip(kept.tolist(), cols.rows.raws(kept.tolist())):
            texts[pos] = _row_bytes(raw)
        data["row"] = pa.array(texts, pa.binary())
    meta = {"fields": [[k, f.kind.value] for k, f in cols.fields.items()], "non_numeric": list(cols.non_numeric or {}),
            "shown": {k: s.text is not None for k, s in (cols.shown or {}).items()},
            "row_text": rows, "errors": cols.errors is not None}  # fmt: skip
    return pa.table(data), meta


def _row_bytes(raw: Any) -> bytes:
    if isinstance(raw, bytes):
        return raw
    if isinstance(raw, str):
        return raw.encode("utf-8", "surrogatepass")
    return orjson.dumps(raw)


def _unified_schema(tables: Sequence[pa.Table]) -> pa.Schema:
    fields: dict[str, pa.Field] = {}
    for table in tables:
        for field in table.schema:
            fields.setdefault(field.name, field)
    return pa.schema(list(fields.values()) or [pa.field("task_index", pa.int64())])


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` with every column of `schema` (absent ones null) in its order."""
    n = table.num_rows
    columns = [table.column(f.name) if f.name in table.column_names else pa.nulls(n, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def read_partial(path: str | os.PathLike[str]) -> RolloutFile:
    """A partial file back as the RolloutFile it was written from; InvalidInputError naming
    the file when it is not a partial or was written by another format version."""
    return merge_partials([path])


def partial_rows(path: str | os.PathLike[str]) -> dict[str, str]:
    """Per agent, which row texts a partial holds: "all", "samples" or "none"."""
    header, _ = _open(Path(path))
    return {meta["name"]: meta["row_text"] for meta in header["agents"]}


def partial_bad_lines(paths: Sequence[str | os.PathLike[str]]) -> list[tuple[str, BadLine]]:
    """The partials' bad lines (`--on-bad-line skip`), each with the input file it was in (the
    partial's own path when its writer did not know it), for merge's warnings."""
    return [(source or f"<an input of {path}>", bad) for path in paths for source, bad in header_bad_lines(_open(Path(path))[0])]


def _open(path: Path) -> tuple[dict[str, Any], pq.ParquetFile]:
    """The partial at `path` and its header, checked against the file (_partial_header)."""
    try:
        import pyarrow.parquet as pq
        parquet = pq.ParquetFile(path, page_checksum_verification=True)
    except (OSError, pa.ArrowException) as exc:
        raise InvalidInputError(f"{path}: not a readable partial file ({exc})", [FieldViolation("partial", str(path))]) from None
    return checked_header(path, parquet), parquet


def merge_partials(paths: Sequence[str | os.PathLike[str]], narrow_keys: bool = False) -> RolloutFile:
    """The partials as one RolloutFile, each agent's columns concatenated in the order given
    (as `concat` would), read a column at a time into arrays of the final size: the merge
    holds the columns once, never the Parquet tables beside them. Row texts (samples) are
    read from the files when used: keep them until the aggregation is written.
    `narrow_keys`: task and rollout indices in the narrowest integer type holding them (int8
    to int64) instead of int64, for a consumer that expects that (the ranged merge, _ranged):
    at 10M rollouts of 8 repeats that is 110 MB less."""
    if not paths:
        raise InvalidInputError("no partial files to merge")
    refuse_files_given_twice(paths, "partials")
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())  # Parquet's scratch goes back to the OS (trim_heap)
    try:
        return _merge(paths, narrow_keys)
    finally:
        pa.set_memory_pool(previous)
        trim_heap()


def _merge(paths: Sequence[str | os.PathLike[str]], narrow_keys: bool) -> RolloutFile:
    opened = [(Path(p), *_open(Path(p))) for p in paths]
    parts: dict[str, list[_Part]] = {}
    for path, header, parquet in opened:
        start = 0
        for i, meta in enumerate(header["agents"]):
            parts.setdefault(meta["name"], []).append(_Part(path, parquet, start, meta, f"agents[{i}]"))
            start += meta["rows"]
    agents = {name: _merged_agent(parts[name], narrow_keys) for name in sorted(parts)}
    bad = [b for _, header, _ in opened for _, b in header_bad_lines(header)]
    return RolloutFile(agents, bad, sum(int(header["rows_read"]) for _, header, _ in opened),
                       _joined_perf([header.get("perf", {}) for _, header, _ in opened]))  # fmt: skip


def _joined_perf(parts: Sequence[dict[str, list[dict[str, Any]]] | None]) -> dict[str, list[dict[str, Any]]] | None:
    """The parts' `ng_perf` blocks per agent (None when a part has not read its own: the
    whole is read from the parts' sources when asked)."""
    if any(part is None for part in parts):
        return None
    joined: dict[str, list[dict[str, Any]]] = {}
    for part in parts:
        for agent, records in (part or {}).items():
            joined.setdefault(agent, []).extend(records)
    return joined


def combine(parts: Sequence[RolloutFile], sources: Sequence[str] | None = None) -> RolloutFile:
    """Several RolloutFiles (files read in this process) as one: each agent's columns
    concatenated. `sources` (the files' names): a repeated key is refused naming its file and
    lines (line numbers alone would not say which file; `--partial-out` checked none)."""
    names = sorted({name for part in parts for name in part.agents})
    if sources is not None:
        _refuse_repeated_keys(parts, sources, names)
    agents = {name: concat([p.agents[name] for p in parts if name in p.agents]) for name in names}
    bad = [b for p in parts for b in p.bad_lines]
    return RolloutFile(agents, bad, sum(p.rows_read for p in parts), _joined_perf([p.perf for p in parts]),
                       [source for p in parts for source in p.sources])  # fmt: skip


def _refuse_repeated_keys(parts: Sequence[RolloutFile], sources: Sequence[str], names: list[str]) -> None:
    for part, where in zip(parts, sources):  # a file's own repeats first, named by its lines
        for cols in part.agents.values():
            _refuse_own_repeats(cols, where)
    refuse_repeated_keys(sources, {
        name: [(i, c.task_index, c.rollout_index, c.row_labels if c.row_labels is not None else np.arange(len(c.task_index)))
               for i, p in enumerate(parts) if name in p.agents for c in (p.agents[name],)]
        for name in names
    })  # fmt: skip


def _refuse_own_repeats(cols: RolloutColumns, where: str) -> None:
    order, dup = cols.key_order()
    if len(dup):
        error = cols.duplicate_keys_error(order if order is not None else np.arange(len(cols.task_index)), dup)
        raise InvalidInputError(f"{where}: {error.message}", error.violations)


def refuse_keys_across_partials(paths: Sequence[str | os.PathLike[str]]) -> None:
    """Name the repeated keys of partial files (run when the merged columns were refused for
    them: the merge keeps no file names). Reads only the key columns. Rows are counted within
    each file's agent from 0, the order `aggregate --partial-out` wrote them."""
    agents: dict[str, list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]] = {}
    sources = [str(p) for p in paths]
    for i, path in enumerate(paths):
        header, parquet = _open(Path(path))
        start = 0
        for k, meta in enumerate(header["agents"]):
            part = _Part(Path(path), parquet, start, meta, f"agents[{k}]")
            task, rollout = part.numpy("task_index"), part.numpy("rollout_index")
            _refuse_own_repeats(RolloutColumns(task, rollout, {}, np.zeros(len(task), bool)), f"{path}: agent {meta['name']!r}")
            agents.setdefault(meta["name"], []).append((i, task, rollout, np.arange(len(task))))
            start += meta["rows"]
    refuse_repeated_keys(sources, agents, label="row", what="partial files")


class _Part:
    """One agent's rows in one partial: where they are and what the header says of them."""

    def __init__(self, path: Path, parquet: pq.ParquetFile, start: int, meta: dict[str, Any], at: str) -> None:
        self.path, self.parquet, self.start, self.meta, self.rows = path, parquet, start, meta, int(meta["rows"])
        self.at = at
        """The header field of this part: agents[i]."""

    def column(self, name: str) -> pa.ChunkedArray:
        try:
            column = self.parquet.read(columns=[name]).column(0).slice(self.start, self.rows)
        except (OSError, pa.ArrowException) as exc:  # a damaged page (its checksum, its compression)
            raise InvalidInputError(f"{self.path}: not a readable partial file: column {name!r}: {exc}", [FieldViolation("partial", str(self.path))]) from None
        if len(column) != self.rows:
            raise self.bad(f"column {name!r} holds {len(column)} of the agent's {self.rows} rows")
        return column

    def numpy(self, name: str) -> np.ndarray:
        """The column's values in this part's rows: none missing, and keys and error codes in
        the range the reader gives them (a partial is input: `aggregate` refuses these too)."""
        column = self.column(name)
        if column.null_count:
            raise self.bad(f"column {name!r} has {column.null_count} missing values in the agent's rows")
        values = column.to_numpy(zero_copy_only=False)
        if name in _RANGES and len(values):
            (low, high), least, most = _RANGES[name], int(values.min()), int(values.max())
            if least < low or (high is not None and most > high):
                allowed = f">= {low}" if high is None else f"within {low}..{high}"
                raise self.bad(f"column {name!r} holds values {least}..{most}, they must be {allowed}")
        return values

    def bad(self, problem: str) -> InvalidInputError:
        return bad_header(self.path, self.at, f"agent {self.meta['name']!r}: {problem}")


_RANGES: dict[str, tuple[int, int | None]] = {"task_index": (0, None), "rollout_index": (0, None), "error": (0, len(ERROR_KINDS))}
"""The columns whose values are checked, and their bounds (what the reader gives: keys >= 0)."""


def _merged_agent(parts: list[_Part], narrow_keys: bool = False) -> RolloutColumns:
    total = sum(p.rows for p in parts)
    at = np.cumsum([0] + [p.rows for p in parts])
    slices = [slice(int(a), int(b)) for a, b in zip(at[:-1], at[1:])]

    def filled(name: str, dtype: Any, default: Any, has: Any = lambda i: True) -> np.ndarray:
        out = np.full(total, default, dtype=dtype)
        for i, (part, where) in enumerate(zip(parts, slices)):
            if has(i) and part.rows:
                out[where] = part.numpy(name)
        trim_heap()  # each part's Parquet scratch goes back before the next column's
        return out

    kinds = [{k: ValueKind(kind) for k, kind in p.meta["fields"]} for p in parts]
    fields = {}
    for name in dict.fromkeys(k for p in parts for k, _ in p.meta["fields"]):
        has_field = lambda i: name in kinds[i]  # noqa: E731
        fields[name] = NumericField(filled(f"value:{name}", np.float64, np.nan, has_field), filled(f"present:{name}", bool, False, has_field))
    merged, mixed = merge_kinds(
        [{k: (kind, bool((fields[k].present[w] & np.isfinite(fields[k].values[w])).any())) for k, kind in kinds_of.items()}
         for kinds_of, w in zip(kinds, slices)]
    )  # fmt: skip
    for name, kind in merged.items():
        fields[name].kind = kind
    non_numeric = {k: filled(f"non_numeric:{k}", bool, False, lambda i: k in parts[i].meta["non_numeric"])
                   for k in dict.fromkeys(k for p in parts for k in p.meta["non_numeric"])}  # fmt: skip
    keys = (lambda name: _narrow(parts, slices, name)) if narrow_keys else (lambda name: filled(name, np.int64, 0))
    cols = RolloutColumns(
        keys("task_index"), keys("rollout_index"), fields, filled("masked", bool, False),
        rows=_rows(parts, slices, total), non_numeric=non_numeric or None,
        errors=filled("error", np.int8, 0, lambda i: parts[i].meta["errors"]) if any(p.meta["errors"] for p in parts) else None,
    )  # fmt: skip
    shown_names = sorted(mixed | {k for p in parts for k in p.meta["shown"]})
    if shown_names:
        cols.shown = {k: concat_shown([_shown(p, w, cols, k, kinds[i]) for i, (p, w) in enumerate(zip(parts, slices))]) for k in shown_names}
    return cols


_NO_ROWS = np.zeros(0, np.int64)


def _narrow(parts: list[_Part], slices: list[slice], name: str) -> np.ndarray:
    """The parts' index column `name` in the narrowest integer type holding its values."""
    pieces = [part.numpy(name) for part in parts]
    bounds = [(int(x.min()), int(x.max())) for x in pieces if len(x)]
    low, high = min((b[0] for b in bounds), default=0), max((b[1] for b in bounds), default=0)
    dtype = next(t for t in (np.int8, np.int16, np.int32, np.int64) if np.iinfo(t).min <= low and high <= np.iinfo(t).max)
    out = np.empty(sum(len(x) for x in pieces), dtype=dtype)
    for i, where in enumerate(slices):
        out[where] = pieces[i]
        pieces[i] = _NO_ROWS  # freed as soon as copied
    return out


def _shown(part: _Part, where: slice, cols: RolloutColumns, name: str, kinds: dict[str, ValueKind]) -> ShownField:
    """What rollout_infos show of `name` in one part's rows (`concat`'s `shown_of`)."""
    if name in part.meta["shown"]:
        text = np.array(part.column(f"shown_text:{name}").to_pylist(), dtype=object) if part.meta["shown"][name] else None
        return ShownField(part.numpy(f"shown_values:{name}"), part.numpy(f"shown_present:{name}"), part.numpy(f"shown_ints:{name}"), text)
    if name not in kinds:
        return shown_of_field(None, part.rows)
    field = cols.fields[name]
    return shown_of_field(NumericField(field.values[where], field.present[where], kinds[name]), part.rows)


def _rows(parts: list[_Part], slices: list[slice], total: int) -> RowSource | None:
    """The kept row texts of every part behind one index (-1: not kept), or None if no part
    kept any; a part that kept none cannot serve samples, so then none is kept."""
    if any(p.meta["row_text"] == "none" for p in parts):
        return None
    index = np.full(total, -1, dtype=np.int32 if total < 2**31 else np.int64)
    counts: list[int] = []
    for part, where in zip(parts, slices):
        try:
            valid = [c.is_valid().to_numpy(zero_copy_only=False) for c in row_groups(part.parquet, "row", part.start, part.rows)]
        except (OSError, pa.ArrowException) as exc:  # a damaged page
            raise InvalidInputError(f"{part.path}: not a readable partial file: its row texts: {exc}", [FieldViolation("partial", str(part.path))]) from None
        have = np.flatnonzero(np.concatenate(valid)) if valid else np.zeros(0, np.int64)
        if part.meta["row_text"] == "all" and len(have) != part.rows:
            raise part.bad(f"row_text is \"all\", but {part.rows - len(have)} of its {part.rows} rows have no text")
        index[where.start + have] = np.arange(sum(counts), sum(counts) + len(have))
        counts.append(len(have))
        trim_heap()  # the texts read to find the kept rows go back before the next part's
    return RowSource(PartialRows([(p.path.resolve(), p.start, p.rows) for p in parts], counts), index)


__all__ = ["FORMAT", "VERSION", "combine", "refuse_keys_across_partials", "merge_partials", "partial_bad_lines", "partial_bytes", "partial_rows", "read_partial", "write_partial"]
