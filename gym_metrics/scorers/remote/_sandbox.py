"""Jinja's immutable sandbox, bounded so a body template cannot build without limit.

The stock sandbox refuses Python internals and mutation but lets `'a' * 10**9` allocate
gigabytes. Here every way a template makes a bigger value is checked *before* it allocates,
against the current render's `Budget` (gym_metrics/scorers/remote/_limits.py):
- operators `*`, `**`, `+`, `-`, `%` (intercepted): repeats, concatenations, big integers, the
  whole output of a `%` format (gym_metrics/scorers/remote/_formats.py);
- `~` (compiled as a checked join), list / tuple / dict literals and `{% set ns.attr = v %}`
  (measured, so shared references cannot double a printed size on each step);
- calls (`'a'.ljust(n)`, `replace`, `join`, `expandtabs`, `translate`, `to_bytes`,
  `from_bytes`, `cycler(...)`), `str.format` / `format_map` (each field's spec after
  substitution, and the running total), and the filters (gym_metrics/scorers/remote/_filters.py);
- `range` (at most MAX_RANGE items), every loop iteration and call (a step budget, and
  MAX_RENDER_SECONDS of wall clock), and each output value (at most max_body_bytes). `lipsum`
  is not available.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from jinja2 import nodes, pass_eval_context
from jinja2.nodes import EvalContext
from jinja2.runtime import Context, markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer
from markupsafe import Markup

from gym_metrics.scorers.remote._filters import bounded_filters, replace_growth
from gym_metrics.scorers.remote._formats import CONTAINERS as _CONTAINERS
from gym_metrics.scorers.remote._formats import BoundedEscapeFormatter, BoundedFormatter, check_percent
from gym_metrics.scorers.remote._limits import (
    MAX_RANGE,
    Budget,
    TemplateLimitError,
    check_count,
    check_int,
    current,
    rendered_size,
    size_of,
)

_LOOP, _CONCAT, _BUILD, _NS_SET = "gm_bounded_loop", "gm_bounded_concat", "gm_bounded_literal", "gm_bounded_ns_set"


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """An immutable sandbox whose templates stay within the current render's `Budget`."""

    intercepted_binops = frozenset({"*", "**", "+", "-", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(finalize=_finalize, **options)
        self.globals["range"] = _bounded_range
        self.globals.pop("lipsum", None)  # n paragraphs of up to `max` words: no use in a request body
        self.filters = bounded_filters(self.filters)
        self.filters.update({_LOOP: _bounded_loop, _CONCAT: _bounded_concat, _BUILD: _bounded_literal, _NS_SET: _bounded_ns_set})

    def _generate(self, source: nodes.Template, name: str | None, filename: str | None, defer_init: bool = False) -> str:
        """Route loops, `~` and literals through the checking filters, then compile as usual."""
        _Bounder().visit(source)
        return super()._generate(source, name, filename, defer_init)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        budget = current()
        budget.step()
        _check_binop(operator, left, right, budget)
        result = self.binop_table[operator](left, right)
        budget.build(size_of(result), repr(operator))
        return result

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        budget = current()
        budget.step()
        args = _check_method(__obj, args, kwargs, budget)
        result = super().call(__context, __obj, *args, **kwargs)
        name = getattr(__obj, "__name__", None)
        return _checked(result, f"{name}()" if isinstance(name, str) else "a macro call", budget)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """`str.format` / `format_map` through a formatter that checks each field's spec after
        substitution (`'{:{}}'.format('x', w)`) and totals the output as it builds."""
        if super().wrap_str_format(value) is None:
            return None
        template, is_map = value.__self__, value.__name__ == "format_map"

        def bounded(*args: Any, **kwargs: Any) -> str:
            budget = current()
            budget.step()
            if is_map and (kwargs or len(args) != 1):
                raise TypeError("format_map() takes exactly one positional argument")
            positional, named = ((), args[0]) if is_map else (args, kwargs)
            if isinstance(template, Markup):
                formatter: BoundedFormatter | BoundedEscapeFormatter = BoundedEscapeFormatter(self, budget, template.escape)
            else:
                formatter = BoundedFormatter(self, budget)
            return type(template)(formatter.vformat(template, positional, named))

        return functools.update_wrapper(bounded, value)


class _Bounder(NodeTransformer):
    """Wraps loop iterables, `~` and (loaded) literals in the checking filters."""

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        node.iter = _filter(node.iter, _LOOP)
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        return _filter(nodes.List(node.nodes, lineno=node.lineno), _CONCAT)

    def visit_List(self, node: nodes.List) -> nodes.Node:
        self.generic_visit(node)
        return _filter(node, _BUILD)

    def visit_Dict(self, node: nodes.Dict) -> nodes.Node:
        self.generic_visit(node)
        return _filter(node, _BUILD)

    def visit_Tuple(self, node: nodes.Tuple) -> nodes.Node:
        self.generic_visit(node)
        return _filter(node, _BUILD) if node.ctx == "load" else node  # not assignment targets

    def visit_Assign(self, node: nodes.Assign) -> nodes.Node:
        """`{% set ns.a = v %}`: the namespace with `v` in it is measured."""
        self.generic_visit(node)
        target = node.target
        if isinstance(target, nodes.NSRef):
            where = [nodes.Name(target.name, "load", lineno=node.lineno), nodes.Const(target.attr, lineno=node.lineno)]
            node.node = _filter(node.node, _NS_SET, where)
        return node


def _filter(node: nodes.Node, name: str, args: list[nodes.Expr] | None = None) -> nodes.Filter:
    return nodes.Filter(node, name, args or [], [], None, None, lineno=node.lineno)


def _bounded_loop(iterable: Iterable[Any]) -> Iterator[Any]:
    """Each loop iteration is a step (nested loops cannot spin for minutes)."""
    budget = current()
    for item in iterable:
        budget.step()
        yield item


@pass_eval_context
def _bounded_concat(eval_ctx: EvalContext, parts: list[Any]) -> str:
    budget = current()
    budget.step()
    for part in parts:  # printed whole: measured before `str()` builds it
        if isinstance(part, _CONTAINERS):
            budget.fits(rendered_size(part, budget.max_bytes, budget), "'~'")
    joined: str = (markup_join if eval_ctx.autoescape else str_join)(parts)
    budget.build(len(joined), "'~'")
    return joined


def _bounded_literal(value: Any) -> Any:
    """A list / tuple / dict literal: its printed size counts shared references each time."""
    budget = current()
    budget.fits(rendered_size(value, budget.max_bytes, budget), "a literal")
    budget.build(size_of(value), "a literal")
    return value


def _bounded_ns_set(value: Any, namespace: Any, attr: str) -> Any:
    """The value of `{% set ns.attr = value %}`: `ns` with it fits (its other attributes
    counted too, so two attributes holding one value cannot double a size on each step)."""
    budget = current()
    budget.step()
    attrs = object.__getattribute__(namespace, "_Namespace__attrs") if isinstance(namespace, Namespace) else {}
    rest = [v for k, v in attrs.items() if k != attr]
    if rest:  # alone, `value` is what a measured builder made: no need to measure it twice
        budget.fits(rendered_size([value, *rest], budget.max_bytes, budget), "a namespace")
    return value


def _bounded_range(*args: int) -> range:
    numbers = range(*args)
    try:
        count = len(numbers)
    except OverflowError:  # more items than a C ssize_t holds
        count = abs(numbers.stop - numbers.start)
    check_count(count, MAX_RANGE, "range length")
    return numbers


def _finalize(value: Any) -> Any:
    """Each `{{ value }}` printed by a text template is at most max_body_bytes."""
    budget = current()
    budget.step()
    if isinstance(value, (str, bytes)):
        budget.fits(len(value), "an output value")
    elif isinstance(value, _CONTAINERS):
        budget.fits(rendered_size(value, budget.max_bytes, budget), "an output value")
    return value


def _checked(result: Any, what: str, budget: Budget) -> Any:
    """Measure what a call built: text by length, containers by printed size."""
    if isinstance(result, _CONTAINERS):
        budget.fits(rendered_size(result, budget.max_bytes, budget), what)
    budget.build(size_of(result), what)
    return result


def _check_binop(operator: str, left: Any, right: Any, budget: Budget) -> None:
    if operator == "*":
        _check_mul(left, right, budget)
    elif operator == "**":
        if isinstance(left, int) and isinstance(right, int) and right > 0 and abs(left) > 1:
            check_int((left.bit_length() - 1) * right + 1, "**")
    elif operator == "+":
        _check_add(left, right, budget)
    elif operator == "-" and isinstance(left, int) and isinstance(right, int):
        check_int(max(left.bit_length(), right.bit_length()) + 1, "-")
    elif operator == "%" and isinstance(left, (str, bytes)):
        check_percent(left if isinstance(left, str) else left.decode("latin-1"), right, budget)


def _check_mul(left: Any, right: Any, budget: Budget) -> None:
    if isinstance(left, int) and isinstance(right, int):
        check_int(left.bit_length() + right.bit_length(), "*")
        return
    sequence, count = (left, right) if isinstance(right, int) else (right, left)
    if not isinstance(count, int) or count <= 0:
        return
    if isinstance(sequence, (str, bytes)):
        budget.fits(len(sequence) * count, "'*'")
    elif isinstance(sequence, (list, tuple)):
        budget.fits(rendered_size(sequence, budget.max_bytes, budget) * count, "'*'")


def _check_add(left: Any, right: Any, budget: Budget) -> None:
    if isinstance(left, int) and isinstance(right, int):
        check_int(max(left.bit_length(), right.bit_length()) + 1, "+")
    elif isinstance(left, (str, bytes)) and isinstance(right, (str, bytes)):
        budget.fits(len(left) + len(right), "'+'")
    elif isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
        size = rendered_size(left, budget.max_bytes, budget) + rendered_size(right, budget.max_bytes, budget)
        budget.fits(size, "'+'")


def _check_method(obj: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], budget: Budget) -> tuple[Any, ...]:
    """Refuse a text method call that would grow past max_body_bytes; returns the arguments
    (an iterator given to `join` is read into a list first, to be measured)."""
    if not isinstance(obj, types.BuiltinMethodType):
        return args
    owner, name = obj.__self__, obj.__name__
    if isinstance(owner, int) and not isinstance(owner, bool) and name == "to_bytes":
        length = args[0] if args else kwargs.get("length", 1)
        if isinstance(length, int):
            budget.fits(length, "to_bytes()")
    if name == "from_bytes" and args and isinstance(args[0], (bytes, bytearray, list, tuple)):
        check_int(8 * len(args[0]), "from_bytes()")  # then `//` / `%` on it would be quadratic
    if not isinstance(owner, (str, bytes)):
        return args
    if name == "join" and args:
        args = (list(args[0]), *args[1:])
    estimate = _text_growth(owner, name, args, kwargs)
    if estimate:
        budget.fits(estimate, f"{name}()")
    return args


def _text_growth(text: str | bytes, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> int:
    """Upper bound of the length of `text.<name>(*args)` for the methods that can grow text
    past a constant factor; 0 for the others (their result is measured afterwards)."""
    size = len(text)
    if name in ("center", "ljust", "rjust", "zfill") and args and isinstance(args[0], int):
        return max(size, args[0])
    if name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        tabs = text.count("\t" if isinstance(text, str) else b"\t")  # type: ignore[arg-type]
        return size + tabs * max(tab, 0) if isinstance(tab, int) else 0
    if name == "join" and args:
        items = args[0]
        return sum(len(i) for i in items if isinstance(i, (str, bytes))) + size * max(len(items) - 1, 0)
    if name == "replace" and len(args) >= 2:
        return replace_growth(text, args[0], args[1], args[2] if len(args) > 2 else kwargs.get("count", -1))
    if name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((len(v) for v in args[0].values() if isinstance(v, (str, bytes))), default=1)
        return size * max(longest, 1)
    return 0


__all__ = ["BoundedSandbox", "TemplateLimitError"]
