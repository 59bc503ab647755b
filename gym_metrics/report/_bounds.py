"""What a report page may repeat, and the type checks on the numbers it draws.

A page draws each agent name in many places (a heat-strip cell, a bar, a point's tooltip, a
table row, a pair), so a long name there multiplied the page (three 300 KB names made a 258 MB
page). Names are shown cut to NAME_CHARS, other text from the file to TEXT_CHARS or
CELL_CHARS; a cut name is listed once in full, up to FULL_NAME_CHARS. At most MAX_AGENTS agents
are drawn: an agent's fixed cost (charts, cells, pairs) would otherwise grow without bound with
the agents. Tables and charts with a row or point per key or rollout index are capped too
(MAX_KEY_METRICS, MAX_REPEATS), so a page stays within a small multiple of its file plus a
fixed part (docs/report.md#bounds). A string or object where a number belongs is an
InvalidInputError naming the file, the agent and the key.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any, TypeGuard

from gym_metrics.errors import InvalidInputError

NAME_CHARS = 64
"""An agent name is shown cut to this many characters (a hash keeps cut names apart)."""
TEXT_CHARS = 200
"""Other text from the file (metric keys, field names) is shown cut to this."""
FULL_NAME_CHARS = 4000
"""A cut name is listed once in full, up to this many characters."""
MAX_AGENTS = 50
"""Agents drawn on one page; the page says when there are more."""
MAX_KEY_METRICS = 100
"""Key metrics tabled (a row holds a cell per agent); the page says when there are more."""
MAX_REPEATS = 100
"""Rollout indices drawn in the repeats chart (a point each)."""
CELL_CHARS = 64
"""A text value in a table cell is shown cut to this."""


def short(text: str, limit: int = TEXT_CHARS) -> str:
    """`text` cut to `limit` characters, the cut marked."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_names(names: Sequence[str]) -> list[str]:
    """Each name cut to NAME_CHARS; a cut name ends in a hash of the whole, so two names that
    share their first characters stay apart (the paired section keys agents by name)."""
    out = []
    for name in names:
        if len(name) <= NAME_CHARS:
            out.append(name)
            continue
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        out.append(f"{name[: NAME_CHARS - 11]}…[{digest}]")
    return out


def finite(value: Any) -> TypeGuard[float]:
    """A number to draw: int or float (not bool), finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def kind(value: Any) -> str:
    """The JSON type of `value` as an error message names it."""
    if value is None:
        return "missing or null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "a number" if isinstance(value, (int, float)) else f"a {type(value).__name__}"


def wrong(value: Any, where: str, key: str, wanted: str) -> InvalidInputError:
    """The error for a value of the wrong type: file and agent (`where`), key, what it is."""
    return InvalidInputError(f"{where}: {short(key)} is {kind(value)}, not {wanted}")


def number(value: Any, where: str, key: str) -> float:
    """`value` as a float (null: NaN); anything else is an error naming `where` and `key`."""
    if value is None:
        return math.nan
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise wrong(value, where, key, "a number")


def mapping(value: Any, where: str, key: str) -> dict[str, Any]:
    """An object field (null or absent: empty)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise wrong(value, where, key, "an object")


def objects(value: Any, where: str, key: str) -> list[dict[str, Any]]:
    """A list of objects (null or absent: empty)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise wrong(value, where, key, "a list")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise wrong(item, where, f"{key}[{i}]", "an object")
    return value
