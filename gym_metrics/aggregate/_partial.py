"""Partial states: the rows one process read, as columns in a Parquet file, so that shards of
a rollouts set read anywhere (other processes, other machines, Ray tasks) merge into exactly
the metrics file one process would write.

A partial holds each agent's columns as the reader made them (keys, numeric fields with their
JSON kinds, masks, error kinds, non-numeric flags, shown values), and of the row text only each
task's sample candidates (or every row, for a row-dict `compute_metrics`). Merging concatenates
the partials' columns and runs the one aggregation engine: the engine orders rows by (task,
rollout) and sums in that order, so the split (by task, by line range, uneven, empty shards)
cannot change a byte of the result. Parquet, so other tools (polars, Ray, DuckDB) can read it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from gym_metrics.aggregate._columns import NumericField, RolloutColumns, RowSource, ShownField, ValueKind, concat
from gym_metrics.aggregate._reader import BadLine, RolloutFile
from gym_metrics.aggregate._rowsource import _Kept
from gym_metrics.errors import FieldViolation, InvalidInputError

FORMAT = "gym-metrics-partial"
VERSION = 1
"""Bumped whenever what a partial holds or means changes; other versions are refused."""
_META = b"gym_metrics.partial"


def write_partial(path: str | os.PathLike[str], rollouts: RolloutFile, sources: Sequence[str] = ()) -> Path:
    """Write `rollouts` (as `read_rollouts` returns it) to `path`, atomically."""
    path = Path(path)
    agents, tables = [], []
    for name in sorted(rollouts.agents):
        table, meta = _agent_table(rollouts.agents[name])
        agents.append({"name": name, "rows": table.num_rows, **meta})
        tables.append(table)
    header = {"format": FORMAT, "version": VERSION, "agents": agents, "rows_read": rollouts.rows_read,
              "bad_lines": [[b.line, b.field, b.reason] for b in rollouts.bad_lines], "sources": list(sources)}  # fmt: skip
    schema = _unified_schema(tables).with_metadata({_META: orjson.dumps(header)})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # the usual permissions, unlike mkstemp's 0600
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
            for table in tables:
                if table.num_rows:
                    writer.write_table(_conform(table, schema), row_group_size=_GROUP_ROWS)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


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
    if cols.row_labels is not None:
        data["label"] = cols.row_labels.astype(np.int64)
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
            "shown": {k: s.text is not None for k, s in (cols.shown or {}).items()}, "label_name": cols.label_name,
            "row_text": rows, "errors": cols.errors is not None, "labels": cols.row_labels is not None}  # fmt: skip
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
    path = Path(path)
    header, parquet = _open(path)
    table = parquet.read()
    agents, start = {}, 0
    for meta in header["agents"]:
        agents[meta["name"]] = _agent_columns(table.slice(start, meta["rows"]), meta)
        start += meta["rows"]
    bad = [BadLine(int(line), str(field), str(reason)) for line, field, reason in header["bad_lines"]]
    return RolloutFile(agents, bad, int(header["rows_read"]))


def partial_rows(path: str | os.PathLike[str]) -> dict[str, str]:
    """Per agent, which row texts a partial holds: "all", "samples" or "none"."""
    header, _ = _open(Path(path))
    return {meta["name"]: meta["row_text"] for meta in header["agents"]}


def _open(path: Path) -> tuple[dict[str, Any], pq.ParquetFile]:
    where = [FieldViolation("partial", str(path))]
    try:
        parquet = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise InvalidInputError(f"{path}: not a readable partial file ({exc})", where) from None
    raw = (parquet.schema_arrow.metadata or {}).get(_META)
    header = orjson.loads(raw) if raw else {}
    if header.get("format") != FORMAT:
        raise InvalidInputError(f"{path}: not a gym-metrics partial (write one with `gym-metrics aggregate ... --partial-out`)", where)
    if header.get("version") != VERSION:
        raise InvalidInputError(
            f"{path}: partial format version {header.get('version')}, this gym-metrics reads version {VERSION}; "
            "write the partial again with this version's `gym-metrics aggregate ... --partial-out`",
            where,
        )
    return header, parquet


def _agent_columns(table: pa.Table, meta: dict[str, Any]) -> RolloutColumns:
    def col(name: str) -> np.ndarray:
        return table.column(name).to_numpy(zero_copy_only=False)

    fields = {k: NumericField(col(f"value:{k}"), col(f"present:{k}"), ValueKind(kind)) for k, kind in meta["fields"]}
    shown = {}
    for k, has_text in meta["shown"].items():
        text = np.array(table.column(f"shown_text:{k}").to_pylist(), dtype=object) if has_text else None
        shown[k] = ShownField(col(f"shown_values:{k}"), col(f"shown_present:{k}"), col(f"shown_ints:{k}"), text)
    rows = None
    if meta["row_text"] != "none":
        texts = table.column("row")
        kept = np.flatnonzero(texts.is_valid().to_numpy(zero_copy_only=False))
        index = np.full(table.num_rows, -1, dtype=np.int64)
        index[kept] = np.arange(len(kept))
        rows = RowSource(_Kept(texts.take(pa.array(kept, pa.int64())).to_pylist()), index)
    errors = col("error") if meta["errors"] else None
    labels = col("label") if meta["labels"] else None
    return RolloutColumns(
        col("task_index"), col("rollout_index"), fields, col("masked"), rows=rows, row_labels=labels,
        label_name=meta["label_name"], errors=errors,
        non_numeric={k: col(f"non_numeric:{k}") for k in meta["non_numeric"]} or None, shown=shown or None,
    )  # fmt: skip


def merge_partials(paths: Sequence[str | os.PathLike[str]]) -> RolloutFile:
    """The partials as one RolloutFile (agents' columns concatenated in the order given)."""
    if not paths:
        raise InvalidInputError("no partial files to merge")
    return combine([read_partial(p) for p in paths])


def combine(parts: Sequence[RolloutFile]) -> RolloutFile:
    """Several RolloutFiles (files read, partials) as one: each agent's columns concatenated."""
    names = sorted({name for part in parts for name in part.agents})
    agents = {name: concat([p.agents[name] for p in parts if name in p.agents]) for name in names}
    bad = [b for p in parts for b in p.bad_lines]
    return RolloutFile(agents, bad, sum(p.rows_read for p in parts))


__all__ = ["FORMAT", "VERSION", "combine", "merge_partials", "partial_rows", "read_partial", "write_partial"]
