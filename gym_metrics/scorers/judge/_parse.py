"""Reading judge replies: the JSON object in a chatty reply, lenient booleans, short quotes.

Judges wrap JSON in prose or markdown fences; RAGAS strips those before validating, so do we.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRUE = frozenset({"true", "1", "yes", "y", "on", "t"})
_FALSE = frozenset({"false", "0", "no", "n", "off", "f"})


class ReplyFormatError(ValueError):
    """The judge's reply does not have the shape the prompt asked for."""


def quote(text: str, limit: int = 200) -> str:
    """A reply shortened for an error message (repr, so newlines stay visible)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


_MAX_DECODE_ATTEMPTS = 100
"""Candidates `extract_json` tries past the whole text and fenced blocks: each failed decode
costs up to the reply's length (the decoder's error counts lines), so trying every bracket of a
reply made of brackets was quadratic (300 KB took 30 s of CPU on the event loop)."""
_CANDIDATE = re.compile(r'\{(?=\s*["}])|\[(?=\s*(?:[\[\]{"0-9-]|true|false|null))')
"""Where a JSON object or array can start: `{` before a key or `}`, `[` before a value or `]`
(prose brackets such as `{name}` or `[see above]` are never tried)."""


def _decode(decode: Callable[[], Any]) -> tuple[bool, Any, bool]:
    """(decoded, value, too_deep) of one attempt."""
    try:
        return True, decode(), False
    except RecursionError:  # nested past the parser's stack: unreadable, not a crash
        return False, None, True
    except ValueError:
        return False, None, False


def extract_json(reply: str) -> Any:
    """The first JSON object (or array) in `reply`: whole text, a fenced block, or the first
    `{`/`[` that starts a valid document (among the first `_MAX_DECODE_ATTEMPTS` that can)."""
    too_deep = False
    for text in (reply.strip(), *(m.strip() for m in _FENCE.findall(reply))):
        ok, value, deep = _decode(lambda: json.loads(text))
        if ok:
            return value
        too_deep |= deep
    decoder = json.JSONDecoder()
    tried = ""
    for attempt, match in enumerate(_CANDIDATE.finditer(reply)):
        if attempt == _MAX_DECODE_ATTEMPTS:
            tried = f" (tried the first {_MAX_DECODE_ATTEMPTS} places one could start)"
            break
        start = match.start()
        ok, value, deep = _decode(lambda: decoder.raw_decode(reply, start)[0])
        if ok:
            return value
        too_deep |= deep
    if too_deep:
        raise ReplyFormatError(f"the reply's JSON is nested too deep to read{tried}")
    raise ReplyFormatError(f"no JSON object in the reply{tried}")


def json_field(reply: str, name: str) -> Any:
    """`reply`'s JSON object's field `name`."""
    data = extract_json(reply)
    if not isinstance(data, dict):
        raise ReplyFormatError(f"expected a JSON object with {name!r}, got {type(data).__name__}")
    if name not in data:
        raise ReplyFormatError(f"the JSON object has no {name!r}")
    return data[name]


def as_bool(value: Any, what: str) -> bool:
    """A verdict as pydantic's lax mode reads booleans: true/false, 0/1 and yes/no words."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, float) and value in (0.0, 1.0):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise ReplyFormatError(f"{what} must be true or false, got {value!r}")


def as_str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ReplyFormatError(f"{what} must be a string, got {type(value).__name__}")
    return value


def as_str_list(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ReplyFormatError(f"{what} must be a list of strings")
    return value
