"""Text a body template builds in one call from a format or a value: `%` / `|format`,
`str.format` / `format_map`, and `|tojson`, each held to the render's `Budget` before it builds.

Checking each width alone is not enough: `'{:{}}'.format('x', w)` gets its width after
substitution (a string, a list item, a float), and a thousand `%1000000s` fields or `{0}`
fields repeating one large value each stay under the per-value limit. So a `%` format's whole
output is estimated first (every width, precision and value it prints), `str.format` checks each
field's final spec and keeps a running total, and `|tojson` counts its output as it streams.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from jinja2.sandbox import SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import Cycler, Namespace
from markupsafe import Markup

from gym_metrics.scorers.remote._limits import Budget, check_count, rendered_size

CONTAINERS = (list, tuple, dict, set, frozenset, Namespace, Cycler)
"""Values whose printed size is measured (element by element, shared references each time)."""
MAX_JSON_INDENT = 16
"""Largest `|tojson(indent=...)`: spaces per level, or characters of an indent string."""

_PERCENT = re.compile(r"%(?:\(([^)]*)\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?(.?)")
_DIGITS = re.compile(r"\d+")
_SHORT = frozenset("srabcdiouxXeEfFgG")


def shown_size(value: Any, budget: Budget) -> int:
    """About how many characters `value` prints as (a lower bound for text and containers)."""
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, bool) or value is None:
        return 5
    if isinstance(value, int):
        return value.bit_length() * 3 // 10 + 2
    if isinstance(value, CONTAINERS):
        return rendered_size(value, budget.max_bytes, budget)
    return 32  # a float prints in at most ~24 characters; `%f` of 1e308 in 316 (a constant)


def _number(digits: str) -> int:
    return int(digits) if len(digits) <= 12 else 10**12  # over any limit; no slow int() of 10k digits


def check_percent(fmt: str, args: Any, budget: Budget) -> None:
    """Refuse `fmt % args` when its output (literal text, every width and precision, and each
    value printed, `*` widths included) would pass max_body_bytes."""
    values = _Values(args, budget)
    total = len(fmt)
    for match in _PERCENT.finditer(fmt):
        key, width, precision, kind = match.groups()
        if kind == "%" and key is None and width is None and precision is None:
            continue  # `%%`
        for part in (width, precision):
            size = values.star() if part == "*" else _number(part) if part else 0
            check_count(size, budget.max_bytes, "a format width")
            total += size
        shown = values.take(key)
        if kind in ("s", "r", "a") and precision and precision != "*":
            shown = min(shown, _number(precision))
        total += shown
        budget.fits(total, "a % format")


class _Values:
    """The values a `%` format prints, taken in order (or by key from a mapping), measured."""

    def __init__(self, args: Any, budget: Budget) -> None:
        self.budget = budget
        self.mapping = args if isinstance(args, Mapping) else None
        self.items: Iterator[Any] = iter(args if isinstance(args, tuple) else (args,))
        self._largest: int | None = None

    def star(self) -> int:
        value = next(self.items, 0)
        return value if isinstance(value, int) else 0

    def take(self, key: str | None) -> int:
        if self.mapping is None or key is None:
            return shown_size(next(self.items, None), self.budget)
        if key in self.mapping:
            return shown_size(self.mapping[key], self.budget)
        if self._largest is None:  # a key this parser reads differently (`%((a))s`): the worst case
            self._largest = max((shown_size(v, self.budget) for v in self.mapping.values()), default=0)
        return self._largest


class _Bounded:
    """`string.Formatter` hooks holding one `str.format` call to the budget: each field's spec
    is checked after substitution and the output is totalled field by field."""

    budget: Budget
    total: int

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        self._printing(value, 0)
        return super().convert_field(value, conversion)  # type: ignore[misc]

    def format_field(self, value: Any, format_spec: str) -> Any:
        numbers = [_number(d) for d in _DIGITS.findall(format_spec)]
        for number in numbers:
            check_count(number, self.budget.max_bytes, "a format width")
        self._printing(value, sum(numbers))
        text = super().format_field(value, format_spec)  # type: ignore[misc]
        self.total += len(text)
        self.budget.build(self.total, "str.format()")
        return text

    def _printing(self, value: Any, padding: int) -> None:
        """Before a field is built: what is built so far, its padding and, for a container
        (printed whole), its printed size fit. Text is measured once built (a copy at most)."""
        shown = shown_size(value, self.budget) if isinstance(value, CONTAINERS) else 0
        self.budget.fits(self.total + padding + shown, "str.format()")


class BoundedFormatter(_Bounded, SandboxedFormatter):
    """Jinja's sandboxed `str.format`, bounded."""

    def __init__(self, env: Any, budget: Budget) -> None:
        super().__init__(env)
        self.budget, self.total = budget, 0


class BoundedEscapeFormatter(_Bounded, SandboxedEscapeFormatter):
    """The same for `Markup.format` (escapes each value)."""

    def __init__(self, env: Any, budget: Budget, escape: Any) -> None:
        super().__init__(env, escape=escape)
        self.budget, self.total = budget, 0


def bounded_tojson(value: Any, indent: int | str | None, budget: Budget) -> Markup:
    """Jinja's `|tojson` (sorted keys, HTML-safe), its indent at most MAX_JSON_INDENT and its
    output counted while it streams, so a deep value cannot print gigabytes of indentation."""
    if indent is not None:
        check_count(len(indent) if isinstance(indent, str) else int(indent), MAX_JSON_INDENT, "|tojson indent")
    budget.fits(rendered_size(value, budget.max_bytes, budget), "|tojson")
    parts, total = [], 0
    for chunk in json.JSONEncoder(sort_keys=True, indent=indent).iterencode(value):
        total += len(chunk) + 5 * sum(chunk.count(c) for c in "<>&'")
        budget.fits(total, "|tojson output")
        parts.append(chunk)
    text = "".join(parts)
    for char, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("'", "\\u0027")):
        text = text.replace(char, escaped)
    return Markup(text)
