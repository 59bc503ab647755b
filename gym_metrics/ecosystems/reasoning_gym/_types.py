"""What JSON loses of an entry, written beside it and put back: tuples (JSON has only lists) and
dicts keyed by integers (JSON keys are strings).

Some scorers compare the parsed answer with the entry's own values: ARC's compares a board of
tuples with `metadata["output"]`, and the same board read back from JSON as lists is "wrong"
(0.05 instead of 1.0). So a row carries `entry_types`, a map from a path in the entry to what
was there (`"tuple"` or `"int_keys"`), and the entry is rebuilt with those before scoring.

A path is the keys and list positions from the entry down, joined by `/` (a `~` or `/` inside a
key written `~0` / `~1`, as in a JSON pointer); `*` stands for every element of a sequence whose
elements all have the same types, so a 30 x 30 board of tuples is two paths, not 31.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TUPLE = "tuple"
INT_KEYS = "int_keys"
EVERY = "*"

_Marks = dict[tuple[str, ...], str]


def python_types(value: Any) -> dict[str, str]:
    """The paths of `value` whose containers JSON does not keep, and what each was ({} when
    JSON keeps all of it). TypeError for a dict key JSON cannot carry back (not str or int)."""
    return {"/".join(_escape(p) for p in path): kind for path, kind in _marks(value).items()}


def restore(value: Any, types: Mapping[str, str]) -> Any:
    """`value` read back from JSON with the containers `types` names made again; ValueError
    naming a path that does not fit the value."""
    if not types:
        return value
    tree = _Node()
    for path, kind in types.items():
        node = tree
        for part in path.split("/") if path else []:
            node = node.children.setdefault(_unescape(part), _Node())
        node.kind = kind
    return _rebuild(value, tree, "")


class _Node:
    """One path part of `entry_types`: what is there, and the parts below it."""

    __slots__ = ("children", "kind")

    def __init__(self) -> None:
        self.kind: str | None = None
        self.children: dict[str, _Node] = {}


_LEAF = _Node()


def _marks(value: Any) -> _Marks:
    if isinstance(value, (list, tuple)):
        marks: _Marks = {(): TUPLE} if isinstance(value, tuple) else {}
        inner = [_marks(v) for v in value]
        if inner and all(m == inner[0] for m in inner[1:]):
            marks.update(((EVERY, *p), k) for p, k in inner[0].items())
        else:
            marks.update(((str(i), *p), k) for i, m in enumerate(inner) for p, k in m.items())
        return marks
    if isinstance(value, dict):
        marks = {}
        keys = list(value)
        if keys and all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
            marks[()] = INT_KEYS
        elif not all(isinstance(k, str) for k in keys):
            bad = next(k for k in keys if not isinstance(k, str))
            raise TypeError(f"a dict key of type {type(bad).__name__} ({bad!r}) does not survive JSON")
        for key, v in value.items():
            marks.update(((str(key), *p), k) for p, k in _marks(v).items())
        return marks
    return {}


def _rebuild(value: Any, node: _Node, where: str) -> Any:
    kind, below = node.kind, node.children
    if isinstance(value, list):
        every = below.get(EVERY)
        items = [_rebuild(v, every or below.get(str(i), _LEAF), f"{where}/{i}") for i, v in enumerate(value)]
        if kind not in (None, TUPLE):
            raise ValueError(f"entry_types: {where or '/'} is a list, not {kind}")
        return tuple(items) if kind == TUPLE else items
    if isinstance(value, dict):
        out = {k: _rebuild(v, below[k], f"{where}/{k}") if k in below else v for k, v in value.items()}
        if kind == INT_KEYS:
            try:
                return {int(k): v for k, v in out.items()}
            except ValueError:
                raise ValueError(f"entry_types: {where or '/'} has a key that is not an integer") from None
        if kind is not None:
            raise ValueError(f"entry_types: {where or '/'} is an object, not {kind}")
        return out
    if kind is not None or below:
        raise ValueError(f"entry_types: {where or '/'} is {type(value).__name__}, not {kind or 'a container'}")
    return value


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def _unescape(part: str) -> str:
    return part.replace("~1", "/").replace("~0", "~")


__all__ = ["INT_KEYS", "TUPLE", "python_types", "restore"]
