"""The one JSONPath compiler (jsonpath-ng's extended syntax) for paths a config names: remote
scorers' `json_path`, agent targets' `response_path` / `tool_calls_path`.

A path is evaluated on an answer from a remote endpoint, on the event loop, and nothing can
interrupt it, so a path is refused when the config is validated unless its cost is about linear
in the answer's size. Refused, each with the reason in the error:
- a regular expression (the filter operator `=~`, `sub(/re/, ...)`): Python's `re` backtracks
  exponentially (`(a+)+$` took 9.8 s on 28 characters, doubling per character) and cannot be
  stopped;
- more than one `..`, or a `..` inside a filter, `where` or sort key (each multiplies the work
  by the answer's size or depth);
- `$` or `` `parent` `` inside a filter, `where` or sort key (the whole answer again per item),
  except a singular query such as `$.limit` or `$.a[0]` (RFC 9535's comparison operand).
Arithmetic (`$.a * 100`) stays, on numbers only: `"x" * 10**9` or a list repeat matches nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

from jsonpath_ng import Child, Fields, Index, JSONPath, Parent, Root, Where
from jsonpath_ng.ext import parse
from jsonpath_ng.ext.arithmetic import Operation
from jsonpath_ng.ext.filter import Expression, Filter
from jsonpath_ng.ext.iterable import SortedThis
from jsonpath_ng.ext.string import Sub
from jsonpath_ng.jsonpath import Descendants

_NESTED = "inside a filter, `where` or sort key (evaluated once per item, it multiplies the work)"


@lru_cache(maxsize=256)
def compile_path(path: str) -> JSONPath:
    """The parsed path, its arithmetic held to numbers; ValueError saying why when it is not a
    JSONPath or is refused (see the module docstring)."""
    try:
        parsed = parse(path)
    except Exception as exc:  # noqa: BLE001  # jsonpath-ng raises its own lexer/parser errors (no common base)
        raise ValueError(f"not a JSONPath: {path!r}: {exc}") from None
    reason = _refusal(parsed)
    if reason:
        raise ValueError(f"JSONPath {path!r} is refused: {reason}")
    return parsed


def _refusal(root: JSONPath) -> str | None:
    """Why `root` is refused (None when it is not); arithmetic nodes are made numbers-only."""
    descendants = 0
    stack: list[tuple[Any, bool, bool]] = [(root, False, True)]  # node, once per item, may be singular
    while stack:
        node, nested, whole = stack.pop()
        if nested and whole and _singular(node):
            continue  # `$.limit` in a comparison: one lookup per item
        if isinstance(node, Sub) or (isinstance(node, Expression) and node.op == "=~"):
            return (
                "regular expressions (`=~`, `sub(...)`) are not allowed: a pattern such as (a+)+$ "
                "backtracks for seconds on a short answer and cannot be interrupted; compare with "
                "==, !=, <, <=, >, >= instead"
            )
        if isinstance(node, Descendants):
            descendants += 1
            if nested:
                return f"`..` {_NESTED}"
            if descendants > 1:
                return "at most one `..` per path (each one more multiplies the work by the answer's depth)"
        if nested and isinstance(node, (Root, Parent)):
            what = "`$` (other than a singular query such as $.a.b or $.a[0])" if isinstance(node, Root) else "``parent``"
            return f"{what} {_NESTED}"
        if isinstance(node, Operation):
            node.op = _numbers_only(node.op)
        stack.extend((child, inner, not (isinstance(node, Child) and child is node.left)) for child, inner in _children(node, nested))
    return None


def _singular(node: Any) -> bool:
    """`$` followed by names and indices only: one lookup, whatever the answer's size."""
    while isinstance(node, Child):
        right = node.right
        if not (isinstance(right, Index) or (isinstance(right, Fields) and len(right.fields) == 1 and right.fields[0] != "*")):
            return False
        node = node.left
    return isinstance(node, Root)


def _children(node: Any, nested: bool) -> Iterator[tuple[Any, bool]]:
    """The sub-paths of `node`, each with whether it is evaluated once per item."""
    if isinstance(node, Filter):
        yield from ((e, True) for e in node.expressions)
    elif isinstance(node, SortedThis):
        yield from ((e[0], True) for e in node.expressions or ())
    elif isinstance(node, Where):  # WhereNot too: the right side runs on each match
        yield (node.left, nested)
        yield (node.right, True)
    else:
        for name in ("left", "right", "target", "value"):
            child = getattr(node, name, None)
            if isinstance(child, JSONPath):
                yield (child, nested)
        yield from ((o, nested) for o in getattr(node, "operands", ()))


def _numbers_only(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`op` on two numbers; anything else (a string or list repeated, a division by zero) is
    a TypeError, which jsonpath-ng reads as no match."""
    if getattr(op, "numbers_only", False):
        return op

    def checked(left: Any, right: Any) -> Any:
        if not (isinstance(left, (int, float)) and isinstance(right, (int, float))):
            raise TypeError("JSONPath arithmetic is on numbers only")
        try:
            return op(left, right)
        except ArithmeticError as exc:
            raise TypeError(str(exc)) from None

    checked.numbers_only = True  # type: ignore[attr-defined]
    return checked


__all__ = ["compile_path"]
