"""The bounded sandbox's filters: Jinja's own, each charged a step, checked before it can grow
a value past the render's `Budget` and its text result measured; `|tojson` and `|sum` replaced
by versions whose cost is bounded (an indent per level, a quadratic list `sum`).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from jinja2 import pass_environment
from jinja2.environment import Environment
from jinja2.filters import make_attrgetter

from gym_metrics.scorers.remote._formats import CONTAINERS, bounded_tojson, check_percent, shown_size
from gym_metrics.scorers.remote._limits import MAX_RANGE, Budget, check_count, check_int, current, rendered_size

_Check = Callable[[list[Any], dict[str, Any], Budget], None]
WRAP_COPY_CHARS = 65_536
"""`|wordwrap` charges one step per this many characters it copies while breaking long words."""


def bounded_filters(filters: Mapping[str, Callable[..., Any]]) -> dict[str, Callable[..., Any]]:
    """Every filter of `filters`, bounded; `tojson` and `sum` replaced."""
    merged: dict[str, Callable[..., Any]] = {**filters, "tojson": _tojson, "sum": _sum}
    return {name: _bounded_filter(name, func) for name, func in merged.items()}


def replace_growth(text: Any, old: Any, new: Any, count: Any) -> int:
    """Length of `text.replace(old, new, count)`, without building it."""
    if not (isinstance(old, type(text)) and isinstance(new, type(text))):
        return 0
    hits = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        hits = min(hits, count)
    return int(len(text) + hits * max(len(new) - len(old), 0))


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """`func` with a step charged, its growth checked first (when it can grow text) and its
    result measured. Keeps Jinja's pass-context marker (functools.wraps copies it)."""
    skip = 1 if getattr(func, "jinja_pass_arg", None) is not None else 0
    precheck = _FILTER_CHECKS.get(name)

    @functools.wraps(func)
    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget = current()
        budget.step()
        if precheck is not None and len(args) > skip:
            rest = list(args[skip:])
            precheck(rest, kwargs, budget)
            args = (*args[:skip], *rest)
        result = func(*args, **kwargs)
        if isinstance(result, (str, bytes)):
            budget.build(len(result), f"|{name}")
        elif name == "int" and isinstance(result, int):
            check_int(result.bit_length(), "|int")  # `|int(base=16)` of a long text: slow `//`, `%`
        return result

    return bounded


def _tojson(value: Any, indent: int | str | None = None) -> Any:
    return bounded_tojson(value, indent, current())


@pass_environment
def _sum(environment: Environment, iterable: Iterable[Any], attribute: str | int | None = None, start: Any = 0) -> Any:
    """Jinja's `|sum`; lists (or tuples) added to a list `start` are joined in one pass, not
    copied once per item as `sum` does (quadratic), and their total is measured first."""
    if attribute is not None:
        iterable = map(make_attrgetter(environment, attribute), iterable)
    if not isinstance(start, (list, tuple)):
        return sum(iterable, start)
    items = list(iterable)
    for item in items:
        if type(item) is not type(start):
            raise TypeError(f"can only concatenate {type(start).__name__} (not {type(item).__name__!r}) to {type(start).__name__}")
    budget = current()
    budget.fits(rendered_size([start, *items], budget.max_bytes, budget), "|sum")
    return type(start)(itertools.chain(start, *items))


def _param(args: list[Any], kwargs: Mapping[str, Any], index: int, name: str, default: Any) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _check_center(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    width = _param(args, kwargs, 1, "width", 80)
    if isinstance(width, int):
        budget.fits(width, "|center")


def _check_indent(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    width = _param(args, kwargs, 1, "width", 4)
    pad = len(width) if isinstance(width, str) else width if isinstance(width, int) else 0
    text = _text(args[0])
    budget.fits(len(text) + (text.count("\n") + 1) * pad, "|indent")


def _check_format(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    check_percent(_text(args[0]), kwargs or tuple(args[1:]), budget)  # as Jinja: `s % (kwargs or args)`


def _check_join(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    args[0] = items = list(args[0])  # measured, then joined
    separator = _param(args, kwargs, 1, "d", "")
    if isinstance(separator, str):
        budget.fits(len(separator) * max(len(items) - 1, 0), "|join")


def _check_replace(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    if len(args) >= 3:
        count = _param(args, kwargs, 3, "count", None)
        budget.fits(replace_growth(_text(args[0]), args[1], args[2], -1 if count is None else count), "|replace")


def _check_wordwrap(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    """The wrap string's growth, and the time: textwrap breaks a long word by copying its rest
    once per line (a 1,000,000-character word at width 1 took 13 s), charged as steps."""
    text = _text(args[0])
    wrap = _param(args, kwargs, 4, "wrapstring", None)
    if isinstance(wrap, str) and len(wrap) > 1:
        budget.fits(len(text) + (len(text) + 1) * len(wrap), "|wordwrap")
    width = _param(args, kwargs, 1, "width", 79)
    if _param(args, kwargs, 2, "break_long_words", True) and isinstance(width, int):
        longest = max((len(word) for word in text.split()), default=0)
        budget.step(longest * longest // (2 * max(width, 1)) // WRAP_COPY_CHARS)


def _check_fill(name: str, fill: Any, count: Any, budget: Budget) -> None:
    """`fill_with` is repeated up to `count` times: a shared value must not double per step."""
    if fill is not None and isinstance(count, int) and count > 1:
        size = rendered_size(fill, budget.max_bytes, budget) if isinstance(fill, CONTAINERS) else shown_size(fill, budget)
        budget.fits(size * count, f"|{name} fill_with")


def _check_batch(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    count = _param(args, kwargs, 1, "linecount", 0)
    if isinstance(count, int):
        check_count(count, budget.max_bytes, "|batch line count")
    _check_fill("batch", _param(args, kwargs, 2, "fill_with", None), count, budget)


def _check_slice(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    count = _param(args, kwargs, 1, "slices", 0)
    if isinstance(count, int):
        check_count(count, MAX_RANGE, "|slice count")
    _check_fill("slice", _param(args, kwargs, 2, "fill_with", None), count, budget)


def _check_printed(args: list[Any], kwargs: dict[str, Any], budget: Budget) -> None:
    """`|string` / `|pprint` print a container whole: its printed size first."""
    if isinstance(args[0], CONTAINERS):
        budget.fits(rendered_size(args[0], budget.max_bytes, budget), "|string or |pprint of a container")


_FILTER_CHECKS: dict[str, _Check] = {
    "center": _check_center,
    "indent": _check_indent,
    "format": _check_format,
    "join": _check_join,
    "replace": _check_replace,
    "wordwrap": _check_wordwrap,
    "batch": _check_batch,
    "slice": _check_slice,
    "string": _check_printed,
    "pprint": _check_printed,
}

__all__ = ["WRAP_COPY_CHARS", "bounded_filters", "replace_growth"]
