"""The request body rendered from a row, by Jinja templates in a sandbox.

Every string value of the body (at any depth) is a template over `item` (the row) and, as in
NeMo Evaluator SDK's `render_template`, over each of the row's columns by name (`{{ question }}`;
`item` wins a clash). A value that is exactly one `{{ expr }}` is evaluated as an expression and
keeps its native type (a list stays a list, a number a number); any other string renders to a
string. A template that uses `tojson` is read back as JSON, as the SDK does (`"{{ item.tags |
tojson }}"` sends the list, not a string); output that is not JSON is a row error. The environment is
Jinja's immutable sandbox with StrictUndefined: a template cannot reach Python internals
(`item.__class__` ...) nor mutate the row, and an undefined name is an error that lists the
row's columns instead of rendering as an empty string. The sandbox is bounded
(gym_metrics/scorers/remote/_sandbox.py): what a template builds, how long it runs and the rendered body
(`max_body_bytes`) have limits, and going past one is a row error naming it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import (
    StrictUndefined,
    TemplateError,
    TemplateSyntaxError,
    Undefined,
    UndefinedError,
)
from jinja2.environment import Template
from jinja2.sandbox import SecurityError

from gym_metrics.scorers import RowError
from gym_metrics.scorers.remote._limits import DEFAULT_MAX_BODY_BYTES, Budget, TemplateLimitError, current, rendered_size, rendering
from gym_metrics.scorers.remote._sandbox import BoundedSandbox

_ENV = BoundedSandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_SINGLE = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\{\{|\}\}).)*)\}\}\s*$", re.DOTALL)

Render = Callable[[Mapping[str, Any]], Any]


class BodyTemplate:
    """`BodyTemplate(body).render(row)` -> the JSON body for that row (compiled once), at most
    `max_body_bytes` bytes of JSON."""

    def __init__(self, body: Mapping[str, Any], max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self._render = _compile(dict(body), "body")
        self.max_body_bytes = max_body_bytes

    def render(self, row: Mapping[str, Any]) -> Any:
        with rendering(Budget(self.max_body_bytes)):
            body = self._render({**{k: v for k, v in row.items() if isinstance(k, str)}, "item": row})
        _check_body_size(body, self.max_body_bytes)
        return body


def encode_body(body: Any) -> bytes:
    """`body` as JSON exactly as httpx's `json=` (NeMo Evaluator's request) encodes it: an
    integer of any size as written, NaN and infinity refused (orjson wrote NaN as `null`
    silently and refused integers past 64 bits). Raises RowError("body", why)."""
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except RecursionError:
        raise RowError("body", "rendered body is not JSON-serialisable: nested too deep") from None
    except ValueError as exc:
        if "Out of range float" in str(exc):
            raise RowError("body", "rendered body holds NaN or infinity, which JSON cannot carry (NeMo Evaluator refuses it too)") from None
        raise RowError("body", f"rendered body is not JSON-serialisable: {exc}") from None
    except TypeError as exc:
        raise RowError("body", f"rendered body is not JSON-serialisable: {exc}") from None


def _check_body_size(body: Any, limit: int) -> None:
    """The exact size of the JSON sent (`encode_body`'s), once rendering (bounded in characters)
    is done. A body that is not JSON is a row error saying why."""
    size = len(encode_body(body))
    if size > limit:
        raise RowError("body", f"the rendered body is {size:,} bytes of JSON, over max_body_bytes ({limit:,})")


def _compile(value: Any, where: str) -> Render:
    if isinstance(value, Mapping):
        parts = {str(k): _compile(v, f"{where}.{k}") for k, v in value.items()}
        return lambda ctx: {k: f(ctx) for k, f in parts.items()}
    if isinstance(value, list):
        items = [_compile(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return lambda ctx: [f(ctx) for f in items]
    if not isinstance(value, str):
        return lambda ctx: value
    try:
        single = _SINGLE.match(value)
        as_json = "tojson" in value  # the SDK's test, on the template's text
        if single:
            expression = _ENV.compile_expression(single["expr"], undefined_to_none=False)
            return lambda ctx: _guard(where, ctx, lambda: _json_back(as_json, _native(expression(**_identifiers(ctx)))))
        if "{" not in value:
            return lambda ctx: value
        template = _ENV.from_string(value)
        return lambda ctx: _guard(where, ctx, lambda: _json_back(as_json, _text(template, ctx)))
    except TemplateSyntaxError as exc:
        raise ValueError(f"{where}: template does not compile: {exc.message} (line {exc.lineno})") from None
    except RecursionError:  # an expression nested past the parser's stack (2,000 parentheses)
        raise ValueError(f"{where}: template does not compile: nested too deeply") from None


def _identifiers(ctx: Mapping[str, Any]) -> dict[str, Any]:
    """The names an expression can be called with (a column such as `"a b"` is `item["a b"]`)."""
    return {k: v for k, v in ctx.items() if k.isidentifier()}


def _json_back(as_json: bool, value: Any) -> Any:
    """A `tojson` template's text parsed back, as the SDK's `render_template` does."""
    if not as_json or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError) as exc:
        raise _NotJson(f"the template uses tojson, so its output is read as JSON (as NeMo Evaluator SDK does), and it is not JSON: {exc}") from None


class _NotJson(Exception):
    """A `tojson` template whose output is not JSON."""


def _native(value: Any) -> Any:
    """An expression's value, defined, its printed size charged to the body."""
    if isinstance(value, Undefined):
        value._fail_with_undefined_error()  # raises UndefinedError (or SecurityError)
    budget = current()
    budget.emit(rendered_size(value, budget.max_bytes - budget.output, budget))
    return value


def _text(template: Template, ctx: Mapping[str, Any]) -> str:
    """The rendered text, counted chunk by chunk so output stops at max_body_bytes."""
    budget, parts = current(), []
    for chunk in template.generate(ctx):
        budget.emit(len(chunk))
        parts.append(chunk)
    return "".join(parts)


def _guard(where: str, ctx: Mapping[str, Any], render: Callable[[], Any]) -> Any:
    try:
        return render()
    except _NotJson as exc:
        raise RowError(where, str(exc)) from None
    except TemplateLimitError as exc:
        raise RowError(where, f"template exceeds a limit: {exc}") from None
    except SecurityError as exc:
        raise RowError(where, f"template refused by the sandbox: {exc}") from None
    except UndefinedError as exc:
        row = ctx.get("item")
        columns = ", ".join(sorted(map(str, row))) if isinstance(row, Mapping) else ""
        raise RowError(where, f"template uses an undefined name ({exc.message}); the row's columns are: {columns or '(none)'}") from None
    except TemplateError as exc:
        raise RowError(where, f"template failed: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001  # e.g. a filter given the wrong type: a row error, never fatal
        raise RowError(where, f"template failed: {type(exc).__name__}: {exc}") from None
