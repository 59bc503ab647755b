"""One JSON parser for rows, lines and answers: orjson's speed with Python's json's values.

orjson turns integers beyond 64 bits into floats (which changes their value and their str())
and refuses the NaN / Infinity literals Python writers emit. Text holding a run of 19 or more
digits, or that orjson refuses, is parsed by the stdlib instead, so every value is what
`json.loads` gives. (Digit runs are found with translate + substring search: ten times faster
than a regex.)
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

import orjson

_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_RUN = b"0" * 19


def orjson_exact(text: bytes) -> bool:
    """True when orjson reads `text` as Python's json does (no run of 19+ digits, where an
    integer beyond 64 bits could be): its bulk parse of many rows at once may then be used."""
    return _LONG_RUN not in text.translate(_DIGITS_AS_ZERO)


def loads(text: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON text exactly as Python's json would. Raises ValueError: json.JSONDecodeError,
    UnicodeDecodeError (bytes that are not UTF-8), or nesting deeper than the stack allows."""
    source = text if isinstance(text, str) else bytes(text)
    if orjson_exact(source.encode("utf-8", "surrogatepass") if isinstance(source, str) else source):
        try:
            return orjson.loads(source)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(source)
    except RecursionError:  # nested deeper than the stack allows: bad input, not a crash
        raise ValueError("nested too deeply (more than 1024 levels)") from None


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def lone_surrogate_at(raw: bytes, value: Any) -> str | None:
    """The path (`a.b[2]`) of the first string of `value` (parsed from the JSON text `raw`)
    that holds a lone surrogate: Python's json reads `"\\ud800"` into a str that cannot be
    written as UTF-8 again (orjson refuses it). None when there is none; the text is only
    walked when it holds a surrogate escape."""
    if not _SURROGATE_ESCAPE.search(raw):
        return None

    def unwritable(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    def walk(node: Any, path: str) -> str | None:
        if isinstance(node, str):
            return (path or "(the row)") if unwritable(node) else None
        if isinstance(node, dict):
            for key, child in node.items():
                where = f"{path}.{key}" if path else str(key)
                if unwritable(key):
                    return f"{where!r} (a key)"
                if (found := walk(child, where)) is not None:
                    return found
        elif isinstance(node, list):
            for i, child in enumerate(node):
                if (found := walk(child, f"{path}[{i}]")) is not None:
                    return found
        return None

    return walk(value, "")


def writable_text(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys too) written as its escape
    (`\\ud83d`): such a string (an emoji cut in half, which Python's json reads) cannot be
    written as UTF-8, and one in a row's error or generated text failed the whole result. The
    value itself when it has none (the common case: one orjson pass)."""
    try:
        orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
        return value
    except TypeError:
        pass

    def clean(node: Any) -> Any:
        if isinstance(node, str):
            return node.encode("utf-8", "backslashreplace").decode("utf-8")
        if isinstance(node, Mapping):
            return {clean(k): clean(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [clean(v) for v in node]
        return node

    return clean(value)


def json_kind(value: Any) -> str:
    """A JSON-flavoured name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


def encodes(value: Any) -> bool:
    """True when orjson writes `value` (numpy's arrays and scalars too)."""
    try:
        orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:
        return False
    return True


def unencodable(value: Any, where: str) -> str:
    """Where in `value` the first part JSON cannot hold is, and its type (`row['a'][2]: bytes`)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}: a key of type {type(key).__name__}"
            if not encodes(item):
                return unencodable(item, f"{where}[{key!r}]")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            if not encodes(item):
                return unencodable(item, f"{where}[{i}]")
    return f"{where}: {type(value).__name__}"


def dumps(value: Any) -> str:
    """Compact JSON text that `loads` reads back as `value` was: NaN, infinities and integers past
    64 bits kept (orjson writes the first as null and refuses the last); numpy's values as their
    Python ones."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_plain)


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


def dumps_finite(value: Any) -> bytes:
    """JSON as orjson writes it (NaN and infinities as null, numpy's values as theirs), and
    integers past 64 bits kept, which orjson refuses: a row that holds one goes through json."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)
    except TypeError:  # (past 64 bits, or nested past orjson's 254 levels)
        try:
            return json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), default=_plain).encode()
        except RecursionError:  # past Python's recursion limit (some 500 levels), within the readers' 1,024
            return _dumps_deep(value).encode()


def _dumps_deep(value: Any) -> str:
    """`dumps_finite`'s JSON without recursion: a row the readers took (up to 1,024 levels)
    is written, however deep (an AggregateMetrics sample once failed the whole call)."""
    parts: list[str] = []
    stack: list[list[Any]] = []  # [closer, items, first, is_object]

    def open_or_write(item: Any) -> None:
        if hasattr(item, "tolist") and not isinstance(item, (str, bytes)):
            item = item.tolist()
        if isinstance(item, Mapping):
            parts.append("{")
            stack.append(["}", iter(item.items()), True, True])
        elif isinstance(item, (list, tuple)):
            parts.append("[")
            stack.append(["]", iter(item), True, False])
        elif isinstance(item, float) and not math.isfinite(item):
            parts.append("null")
        elif item is None or isinstance(item, (bool, int, float, str)):
            parts.append(json.dumps(item, ensure_ascii=False))
        else:
            raise TypeError(f"{type(item).__name__} is not JSON")

    open_or_write(value)
    while stack:
        top = stack[-1]
        item: Any = next(top[1], _END)
        if item is _END:
            parts.append(top[0])
            stack.pop()
            continue
        if not top[2]:
            parts.append(",")
        top[2] = False
        if top[3]:
            parts.append(json.dumps(str(item[0]), ensure_ascii=False) + ":")
            item = item[1]
        open_or_write(item)
    return "".join(parts)


_END = object()


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: `true` is no number (Python's `True == 1`), numbers are equal by
    value (`1` is `1.0`), arrays item by item, objects key by key."""
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
