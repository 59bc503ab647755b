"""An entry as JSON and back: what JSON cannot hold is written as something it can (`json_bytes`),
and a map of where that happened (`python_types`, a row's `entry_types`) puts it back before
scoring (`restore`).

Some scorers compare the parsed answer with the entry's own values: ARC's compares a board of
tuples with `metadata["output"]`, and the same board read back from JSON as lists is "wrong"
(0.05 instead of 1.0). So a row carries `entry_types`, a map from a path in the entry to what
was there:

| kind | in the entry | in JSON |
|---|---|---|
| `tuple` | a tuple | a list |
| `int_keys` | a dict keyed by integers | an object keyed by their text |
| `set`, `frozenset` | a set | a sorted list (in its order when it does not sort) |
| `fraction`, `decimal`, `complex` | a Fraction, Decimal, complex | its text (`"3/4"`) |

numpy scalars become the Python number or text they equal (no mark: they compare equal). A path
is the keys and list positions from the entry down, joined by `/` (`~` and `/` inside a key
written `~0` and `~1`, as in a JSON pointer); `*` stands for every element of a list whose
elements all have the same marks, so a 30 x 30 board of tuples is two paths, not 31.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from decimal import Decimal
from fractions import Fraction
from typing import Any

import orjson

TUPLE, INT_KEYS = "tuple", "int_keys"
EVERY = "*"
_TEXT = {"fraction": Fraction, "decimal": Decimal, "complex": complex}
_SETS = {"set": set, "frozenset": frozenset}

_Marks = dict[tuple[str, ...], str]


_OPTIONS = orjson.OPT_NON_STR_KEYS


def json_bytes(value: Any, newline: bool = False) -> bytes:
    """`value` as JSON text, what JSON cannot hold written as the table says (a row: one line);
    an integer past 64 bits (lcm's of large values), which orjson refuses, exactly as Python's
    json writes it."""
    try:
        return orjson.dumps(value, default=_as_json, option=_OPTIONS | orjson.OPT_APPEND_NEWLINE if newline else _OPTIONS)
    except TypeError as exc:
        if "64-bit" not in str(exc):
            raise
    text = json.dumps(value, default=_as_json, ensure_ascii=False, separators=(",", ":"))
    return (text + "\n" if newline else text).encode()


def to_json(value: Any) -> tuple[Any, dict[str, str]]:
    """`value` as JSON values (what a row's reader gets), and the marks that restore it."""
    types = python_types(value)  # (first: its TypeError names the path)
    return orjson.loads(json_bytes(value)), types


def python_types(value: Any) -> dict[str, str]:
    """Where `value` holds what JSON cannot, and what ({} when JSON keeps all of it); a walk
    that copies nothing and looks only into containers (it runs per generated row). TypeError
    naming the path of a value neither JSON nor the table holds."""
    marks: _Marks = {}
    try:
        _mark(value, (), marks)
    except _Unheld:
        raise TypeError(_where_unheld(value, "")) from None
    return {_joined(path): kind for path, kind in marks.items()}


@functools.lru_cache(maxsize=4096)
def _joined(path: tuple[str, ...]) -> str:
    """A path's text (rows of one dataset repeat the same few paths)."""
    return "/".join(_escape(p) for p in path)


def restore(value: Any, types: Mapping[str, str]) -> Any:
    """`value` read back from JSON with what `types` marks made again; ValueError naming a
    path that does not fit the value. Only the marked paths are walked (and copied)."""
    if not types:
        return value
    try:
        return _rebuild(value, _tree(tuple(types.items())))
    except _Misfit as exc:
        raise ValueError(f"entry_types: {'/'.join(exc.path) or '/'} {exc.why}") from None


class _Node:
    """One path part of `entry_types`: what is there, and the parts below it."""

    __slots__ = ("children", "kind")

    def __init__(self) -> None:
        self.kind: str | None = None
        self.children: dict[str, _Node] = {}


class _Misfit(Exception):
    """A mark that does not fit the value; its path is gathered on the way out."""

    def __init__(self, why: str) -> None:
        self.why = why
        self.path: list[str] = []


@functools.lru_cache(maxsize=1024)
def _tree(types: tuple[tuple[str, str], ...]) -> _Node:
    """The marks as a tree (rows of one dataset share their few marks: built once)."""
    tree = _Node()
    for path, kind in types:
        node = tree
        for part in path.split("/") if path else []:
            node = node.children.setdefault(_unescape(part), _Node())
        node.kind = kind
    return tree


class _Unheld(Exception):
    """A value neither JSON nor the table holds (its path is found again, off the fast path)."""


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _mark(value: Any, prefix: tuple[str, ...], marks: _Marks) -> None:
    kind = type(value)
    if kind in _SCALARS:
        return
    if kind is dict:
        _mark_dict(value, prefix, marks)
    elif kind is list or kind is tuple:
        _mark_items(value, TUPLE if kind is tuple else None, prefix, marks)
    else:
        _mark_other(value, prefix, marks)


def _mark_items(items: Any, kind: str | None, prefix: tuple[str, ...], marks: _Marks) -> None:
    if kind is not None:
        marks[prefix] = kind
    if all(type(v) in _SCALARS for v in items):
        return
    inner = []
    for item in items:
        below: _Marks = {}
        _mark(item, (), below)
        inner.append(below)
    if all(m == inner[0] for m in inner[1:]):  # every element alike: one `*` path
        marks.update(((*prefix, EVERY, *p), k) for p, k in inner[0].items())
    else:
        marks.update(((*prefix, str(i), *p), k) for i, m in enumerate(inner) for p, k in m.items())


def _mark_dict(value: dict[Any, Any], prefix: tuple[str, ...], marks: _Marks) -> None:
    keyed_by_int = False
    for key, item in value.items():
        if type(key) is not str:
            if not isinstance(key, int) or isinstance(key, bool):
                raise _Unheld
            keyed_by_int = True
        kind = type(item)
        if kind in _SCALARS:
            continue
        path = prefix + (str(key),)
        if kind is dict:  # (the common containers dispatched here: this runs per generated row)
            _mark_dict(item, path, marks)
        elif kind is tuple and all(type(v) in _SCALARS for v in item):
            marks[path] = TUPLE
        else:
            _mark(item, path, marks)
    if keyed_by_int:
        if not all(type(k) is not str for k in value):
            raise _Unheld  # some keys text, some numbers: JSON would merge "1" and 1
        marks[prefix] = INT_KEYS


def _mark_other(value: Any, prefix: tuple[str, ...], marks: _Marks) -> None:
    """Subclasses, numpy scalars, and the table's text and set kinds (the slow path)."""
    for kind, held in _TEXT.items():
        if isinstance(value, held):
            marks[prefix] = kind
            return
    if isinstance(value, (set, frozenset)):
        _mark_items(_sorted(value), "frozenset" if isinstance(value, frozenset) else "set", prefix, marks)
    elif isinstance(value, (list, tuple)):
        _mark_items(value, TUPLE if isinstance(value, tuple) else None, prefix, marks)
    elif isinstance(value, dict):
        _mark_dict(value, prefix, marks)
    elif _plain(value) is value:
        raise _Unheld


def _as_json(value: Any) -> Any:
    """orjson's `default`: what it cannot write itself, as the table writes it."""
    if isinstance(value, (Fraction, Decimal, complex)):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return _sorted(value)
    if isinstance(value, tuple):
        return list(value)
    plain = _plain(value)
    if plain is value:
        raise TypeError(f"a {type(value).__module__}.{type(value).__name__} does not survive JSON")
    return plain


def _where_unheld(value: Any, where: str) -> str:
    """The message for the first value (in path order) that `_mark` cannot hold."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                return f"{where or '/'}: a key of type {type(key).__name__} ({key!r}) does not survive JSON"
            try:
                _mark(item, (), {})
            except _Unheld:
                return _where_unheld(item, f"{where}/{key}")
        return f"{where or '/'}: keys of text and of integers together do not survive JSON"
    if isinstance(value, (list, tuple, set, frozenset)):
        for i, item in enumerate(_sorted(value) if isinstance(value, (set, frozenset)) else value):
            try:
                _mark(item, (), {})
            except _Unheld:
                return _where_unheld(item, f"{where}/{i}")
    return f"{where or '/'}: a {type(value).__module__}.{type(value).__name__} does not survive JSON"


def _plain(value: Any) -> Any:
    """A numpy scalar (or a subclass of str / int / float) as the plain value it equals."""
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    for plain in (bool, int, float, str):
        if isinstance(value, plain):
            return plain(value)
    return value


def _sorted(items: Any) -> list[Any]:
    try:
        return sorted(items)
    except TypeError:
        return list(items)


def _rebuild(value: Any, node: _Node) -> Any:
    kind, below = node.kind, node.children
    if below:
        value = _rebuild_below(value, below)
    if kind is None:
        return value
    if kind == TUPLE or kind in _SETS:
        if type(value) is not list:
            raise _Misfit(f"is {_name(value)}, not {kind}")
        return tuple(value) if kind == TUPLE else _SETS[kind](value)
    if kind == INT_KEYS:
        if type(value) is not dict:
            raise _Misfit(f"is {_name(value)}, not {kind}")
        try:
            return {int(k): v for k, v in value.items()}
        except ValueError:
            raise _Misfit("has a key that is not an integer") from None
    if kind in _TEXT:
        if type(value) is not str:
            raise _Misfit(f"is {_name(value)}, not the text of a {kind}")
        return _TEXT[kind](value)
    raise _Misfit(f"is marked {kind!r}, no kind of entry_types")


def _rebuild_below(value: Any, below: dict[str, _Node]) -> Any:
    """`value`'s marked children rebuilt (a copy of `value` along the marked paths only)."""
    if type(value) is list:
        every = below.get(EVERY)
        out = list(value)
        for i, item in enumerate(out) if every is not None else ((int(k), value[int(k)]) for k in below if k.isdigit() and int(k) < len(value)):
            try:
                out[i] = _rebuild(item, every if every is not None else below[str(i)])
            except _Misfit as exc:
                exc.path.insert(0, str(i))
                raise
        return out
    if type(value) is dict:
        out_dict = dict(value)
        for key, child in below.items():
            if key in out_dict:
                try:
                    out_dict[key] = _rebuild(out_dict[key], child)
                except _Misfit as exc:
                    exc.path.insert(0, key)
                    raise
        return out_dict
    raise _Misfit(f"is {_name(value)}, not a container")


def _name(value: Any) -> str:
    return "a list" if type(value) is list else "an object" if type(value) is dict else type(value).__name__


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


__all__ = ["INT_KEYS", "TUPLE", "json_bytes", "python_types", "restore", "to_json"]
