"""A partial's header (the Parquet schema's `gym_metrics.partial` metadata), checked against
the file before the merge trusts it: the merge sizes its arrays by the header's row counts
and reads the columns it names, so a header edited by hand or by a faulty tool must fail here
as bad input naming the file and the field, not later as an allocation of gigabytes or an
internal error. Every check is O(header) plus the Parquet footer, already read on open."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pyarrow as pa

from gym_metrics.rollouts import BadLine, RolloutFile, ValueKind
from gym_metrics.errors import FieldViolation, InvalidInputError

if TYPE_CHECKING:  # imported where used: pyarrow.parquet costs ~20 ms of every command's start-up
    import pyarrow.parquet as pq

FORMAT = "gym-metrics-partial"
VERSION = 2
"""Bumped whenever what a partial holds or means changes; other versions are refused.
2: each bad line names the input file it was in (merge warns as aggregate does)."""
META_KEY = b"gym_metrics.partial"
ROW_TEXTS = ("all", "samples", "none")

_KEY_COLUMNS = {"task_index": pa.int64(), "rollout_index": pa.int64(), "masked": pa.bool_()}


def bad_header(path: Path, field: str, problem: str) -> InvalidInputError:
    """The error for one bad header field (or column the header names): file and field named."""
    return InvalidInputError(f"{path}: invalid partial", [FieldViolation(field, problem)])


def checked_header(path: Path, parquet: pq.ParquetFile) -> dict[str, Any]:
    """The header of the partial `parquet` (read from `path`), every field of the right type
    and agreeing with the file: agents' row counts sum to the file's, and the columns each
    agent's entry names exist with the types the writer gives them."""
    raw = (parquet.schema_arrow.metadata or {}).get(META_KEY) or b""
    try:
        header = orjson.loads(raw) if raw else {}
    except orjson.JSONDecodeError:
        header = _slow_json(path, raw)  # orjson refuses numbers past a double: name their field below
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidInputError(f"{path}: not a gym-metrics partial (write one with `gym-metrics aggregate ... --partial-out`)",
                                [FieldViolation("partial", str(path))])  # fmt: skip
    _check_version(path, header)
    agents = _field(path, header, "agents", list, "a list")
    names: set[str] = set()
    for i, meta in enumerate(agents):
        _check_agent(path, f"agents[{i}]", meta, parquet.schema_arrow, names)
    _check_rows(path, parquet, agents)
    if _field(path, header, "rows_read", int, "an integer") < 0:
        raise bad_header(path, "rows_read", f"must be >= 0, got {_shown(header['rows_read'])}")
    for i, bad in enumerate(_field(path, header, "bad_lines", list, "a list")):
        if not (isinstance(bad, list) and len(bad) == 4 and _is_int(bad[0]) and bad[0] >= 0 and isinstance(bad[1], str)
                and isinstance(bad[2], str) and isinstance(bad[3], str)):  # fmt: skip
            raise bad_header(path, f"bad_lines[{i}]", f"must be [line, field, reason, source file], got {_shown(bad)}")
    for i, source in enumerate(_field(path, header, "sources", list, "a list")):
        if not isinstance(source, str):
            raise bad_header(path, f"sources[{i}]", f"must be a string, got {_shown(source)}")
    if "perf" in header:  # optional: the rows' ng_perf blocks per agent
        perf = _field(path, header, "perf", dict, "an object")
        for agent, records in perf.items():
            if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
                raise bad_header(path, f"perf[{agent!r}]", "must be a list of objects")
    return header


def _check_version(path: Path, header: dict[str, Any]) -> None:
    version = header.get("version")
    if _is_int(version) and version == VERSION:
        return
    said = "missing" if "version" not in header else _shown(version) + ("" if _is_int(version) else " (not an integer)")
    raise InvalidInputError(
        f"{path}: partial format version {said}, this gym-metrics reads version {VERSION}; "
        "write the partial again with this version's `gym-metrics aggregate ... --partial-out`",
        [FieldViolation("version", str(path))],
    )


def _check_agent(path: Path, at: str, meta: Any, schema: pa.Schema, names: set[str]) -> None:
    """One entry of `agents`: its fields' types, and the columns it names in `schema`."""
    if not isinstance(meta, dict):
        raise bad_header(path, at, f"must be an object, got {_shown(meta)}")
    name = _field(path, meta, "name", str, "a string", at)
    if not name or name in names:
        raise bad_header(path, f"{at}.name", "empty" if not name else f"agent {name!r} listed twice")
    names.add(name)
    if _field(path, meta, "rows", int, "an integer", at) < 0:
        raise bad_header(path, f"{at}.rows", f"must be >= 0, got {_shown(meta['rows'])}")
    columns = {column: (kind, at) for column, kind in _KEY_COLUMNS.items()}  # column: (its type, the field naming it)
    for j, pair in enumerate(_field(path, meta, "fields", list, "a list", at)):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and pair[1] in _KINDS):
            raise bad_header(path, f"{at}.fields[{j}]", f"must be [name, one of {'/'.join(_KINDS)}], got {_shown(pair)}")
        columns.update({f"value:{pair[0]}": (pa.float64(), f"{at}.fields[{j}]"), f"present:{pair[0]}": (pa.bool_(), f"{at}.fields[{j}]")})
    for j, key in enumerate(_field(path, meta, "non_numeric", list, "a list", at)):
        if not isinstance(key, str):
            raise bad_header(path, f"{at}.non_numeric[{j}]", f"must be a string, got {_shown(key)}")
        columns[f"non_numeric:{key}"] = (pa.bool_(), f"{at}.non_numeric[{j}]")
    for key, has_text in _field(path, meta, "shown", dict, "an object", at).items():
        if not isinstance(has_text, bool):
            raise bad_header(path, f"{at}.shown.{key}", f"must be true or false, got {_shown(has_text)}")
        kinds = {"shown_values": pa.float64(), "shown_present": pa.bool_(), "shown_ints": pa.bool_(), "shown_text": pa.binary()}
        columns.update({f"{c}:{key}": (kind, f"{at}.shown.{key}") for c, kind in kinds.items() if has_text or c != "shown_text"})
    if meta.get("row_text") not in ROW_TEXTS:
        raise bad_header(path, f"{at}.row_text", f"must be one of {'/'.join(ROW_TEXTS)}, got {_shown(meta.get('row_text'))}")
    columns.update({"row": (pa.binary(), f"{at}.row_text")} if meta["row_text"] != "none" else {})
    columns.update({"error": (pa.int8(), f"{at}.errors")} if _field(path, meta, "errors", bool, "true or false", at) else {})
    for column, (kind, field) in columns.items():
        index = schema.get_field_index(column)
        if index < 0 or schema.field(index).type != kind:
            found = "the file has no such column" if index < 0 else f"the file's column is {schema.field(index).type}, not {kind}"
            raise bad_header(path, field, f"names column {column!r} of agent {name!r}: {found}")


def _check_rows(path: Path, parquet: pq.ParquetFile, agents: list[dict[str, Any]]) -> None:
    """The agents' rows are the file's rows, and the footer's count is its row groups' sum."""
    meta = parquet.metadata
    in_groups = sum(meta.row_group(i).num_rows for i in range(meta.num_row_groups))
    if in_groups != meta.num_rows:
        raise bad_header(path, "row groups", f"the footer says {meta.num_rows} rows, its row groups hold {in_groups}")
    for i, agent in enumerate(agents):
        if agent["rows"] > meta.num_rows:
            raise bad_header(path, f"agents[{i}].rows", f"{_shown(agent['rows'])} rows, more than the file's {meta.num_rows}")
    declared = sum(agent["rows"] for agent in agents)
    if declared != meta.num_rows:
        raise bad_header(path, "agents[].rows", f"the agents' rows add up to {declared}, the file holds {meta.num_rows}")


_KINDS = tuple(k.value for k in ValueKind)


def sourced_bad_lines(rollouts: RolloutFile, sources: Sequence[str]) -> list[list[Any]]:
    """The header's `bad_lines`: each as [line, field, reason, the file it was in]. The file is
    the first of the rows' sources (in order, as `combine` joins them) that left that line out;
    without one (rows not read by read_rollouts), the only source given, else ""."""
    left_out = [(s.path, set(s.bad_lines)) for s in rollouts.sources]
    fallback = sources[0] if len(sources) == 1 else ""
    out, k = [], 0
    for bad in rollouts.bad_lines:
        while k < len(left_out) and bad.line not in left_out[k][1]:
            k += 1
        if k < len(left_out):
            left_out[k][1].discard(bad.line)  # (line 3 of the next file is another line)
        out.append([bad.line, bad.field, bad.reason, left_out[k][0] if k < len(left_out) else fallback])
    return out


def header_bad_lines(header: dict[str, Any]) -> list[tuple[str, BadLine]]:
    """A checked header's bad lines, each with the file it was in ("" when not recorded)."""
    return [(str(source), BadLine(int(line), str(field), str(reason))) for line, field, reason, source in header["bad_lines"]]


def _field(path: Path, obj: dict[str, Any], key: str, kind: type, what: str, at: str = "") -> Any:
    """obj[key], which must be a `kind` (an int is never a bool here, nor a bool an int)."""
    name = f"{at}.{key}" if at else key
    if key not in obj:
        raise bad_header(path, name, "missing")
    value = obj[key]
    ok = _is_int(value) if kind is int else isinstance(value, kind)
    if not ok:
        raise bad_header(path, name, f"must be {what}, got {_shown(value)}")
    return value


def _slow_json(path: Path, raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:  # UnicodeDecodeError too
        raise bad_header(path, "header", "not JSON") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    """A header value in a message: JSON, cut short (a header may hold anything)."""
    text = json.dumps(value)  # not orjson: an integer past 64 bits is shown too
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["FORMAT", "META_KEY", "ROW_TEXTS", "VERSION", "bad_header", "checked_header", "header_bad_lines", "sourced_bad_lines"]
