"""Reading judge replies: the JSON object in a chatty reply, lenient booleans, short quotes.

Judges wrap JSON in prose or markdown fences; RAGAS strips those before validating, so do we.
"""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRUE = frozenset({"true", "1", "yes", "y", "on", "t"})
_FALSE = frozenset({"false", "0", "no", "n", "off", "f"})


class ReplyFormatError(ValueError):
    """The judge's reply does not have the shape the prompt asked for."""


def quote(text: str, limit: int = 200) -> str:
    """A reply shortened for an error message (repr, so newlines stay visible)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def extract_json(reply: str) -> Any:
    """The first JSON object (or array) in `reply`: whole text, a fenced block, or the first
    `{`/`[` that starts a valid document."""
    candidates = [reply.strip(), *(m.strip() for m in _FENCE.findall(reply))]
    for text in candidates:
        try:
            return json.loads(text)
        except ValueError:
            pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(reply):
        if ch in "{[":
            try:
                return decoder.raw_decode(reply, i)[0]
            except ValueError:
                continue
    raise ReplyFormatError("no JSON object in the reply")


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
