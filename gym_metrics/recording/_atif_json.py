"""The JSON side of the ATIF export: rows read as RFC 8259 has them, values compared as JSON
compares them, files written as NeMo Gym writes them, and the refusal every check raises."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any

import orjson

from gym_metrics._util.jsonio import same_json


class AtifRefused(ValueError):
    """A row the profile cannot represent whole; the message starts with the path of what does not fit."""

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}")
        self.path = path



def strict_json_loads(text: str | bytes) -> Any:
    """JSON as RFC 8259 has it: no NaN or Infinity, no duplicate keys, no number that a float
    would change (so what is exported is what was recorded)."""

    def constant(name: str) -> Any:
        raise ValueError(f"non-JSON constant {name!r}")

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"JSON number {text!r} is beyond a float's range")
        if value == 0.0 and any(c in "123456789" for c in text.lower().split("e", 1)[0]):
            raise ValueError(f"JSON number {text!r} underflows a float")
        if value != 0.0 and Decimal(text) != Decimal(repr(value)):
            raise ValueError(f"JSON number {text!r} would lose precision as a float")
        return value

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ValueError(f"duplicate object key {key!r}")
            out[key] = value
        return out

    return json.loads(text, parse_constant=constant, parse_float=number, object_pairs_hook=unique)


def pruned(value: Any) -> Any:
    """`value` without object fields that are null (how a validated copy of it dumps)."""
    if isinstance(value, dict):
        return {k: pruned(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [pruned(v) for v in value]
    return value


def same_copy(a: Any, b: Any) -> bool:
    """Whether two copies of one record agree once their null fields are dropped; the same
    bytes (the usual case, fast) answer at once (orjson cannot write an integer past 64 bits:
    then compared value by value)."""
    option = orjson.OPT_SORT_KEYS
    try:
        if orjson.dumps(a, option=option) == orjson.dumps(b, option=option):
            return True
    except TypeError:
        pass
    return same_json(pruned(a), pruned(b))


def check_json(value: Any, path: str) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise AtifRefused(path, "contains an unpaired Unicode surrogate and is not valid UTF-8 JSON") from None
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise AtifRefused(path, "non-finite numbers are not valid JSON")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_json(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise AtifRefused(path, "JSON object keys must be strings")
            check_json(key, f"{path}.<key>")  # a key's unpaired surrogate too, as NeMo Gym checks keys
            check_json(item, f"{path}.{key}")
    else:
        raise AtifRefused(path, f"{type(value).__name__} is not a JSON value")


_BIG = "\x00gym-metrics-big-int-5f0c\x00"
"""Marks an integer past 64 bits while orjson writes the file (see `atif_bytes`)."""


def _big_ints_marked(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        return f"{_BIG}{value}{_BIG}"
    if isinstance(value, dict):
        return {k: _big_ints_marked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_big_ints_marked(v) for v in value]
    return value


def atif_bytes(trajectory: Mapping[str, Any], where: str = "trajectory") -> bytes:
    """A trajectory's file: two-space indented UTF-8 JSON and a newline, as NeMo Gym writes one;
    AtifRefused for one nested past what orjson writes (254 levels). An integer past 64 bits
    (a request's or a tool argument's, say), which orjson cannot write, is written in digits as
    NeMo Gym writes it (the row was refused as unwritable)."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_APPEND_NEWLINE
    try:
        return orjson.dumps(trajectory, option=option)
    except orjson.JSONEncodeError as exc:
        if "64-bit" not in str(exc):
            raise AtifRefused(where, f"cannot be written as JSON ({exc})") from None
    try:
        marked = orjson.dumps(_big_ints_marked(trajectory), option=option)
    except orjson.JSONEncodeError as exc:
        raise AtifRefused(where, f"cannot be written as JSON ({exc})") from None
    quoted = re.escape(orjson.dumps(_BIG)[1:-1])
    return re.sub(b'"' + quoted + b"(-?[0-9]+)" + quoted + b'"', rb"\1", marked)


def read_rows(lines: Iterable[bytes]) -> Iterator[tuple[int, dict[str, Any] | AtifRefused]]:
    """(line number, row or why the line is not a row) per line of a rollouts file."""
    for number, line in enumerate(lines, 1):
        if not line.strip():
            yield number, AtifRefused(f"line {number}", "blank JSONL records are not supported")
            continue
        try:
            row = strict_json_loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            yield number, AtifRefused(f"line {number}", f"invalid JSON ({exc})")
            continue
        except RecursionError:
            yield number, AtifRefused(f"line {number}", "invalid JSON (nested too deeply)")
            continue
        yield number, row if isinstance(row, dict) else AtifRefused(f"line {number}", "expected a JSON object")
