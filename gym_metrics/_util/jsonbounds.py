"""Bounds on one JSON document a request carries, checked before it is parsed.

A parsed document costs memory and parse time by its items, not its bytes: 2 bytes of `{}`
become a 64-byte dict, so 60 MB of empty objects took 3.1 GB and 12 s of the event loop. Items
are counted with `bytes.count` as upper bounds (a `{`, `[` or `,` inside a string counts too);
past a bound they are counted again outside the strings (code in a string is full of braces),
and a document past a bound then is refused naming the field before anything is built. Nesting is
bounded by the parsers themselves (pydantic-core at 200 levels, orjson at 1024).

The parse stays on the event loop: orjson and pydantic-core hold the GIL for the whole parse, so
a thread would stall the loop just as long (measured: a 1M-object parse in a thread left the
loop 92 ms without a turn). The bounds keep the longest parse short instead (100,000 objects
take about 25 ms), and a long text is counted in slices, the loop turning between them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from gym_metrics.errors import FieldViolation, InvalidInputError

MAX_JSON_CONTAINERS = 100_000
"""Objects and lists one JSON document of a request may hold (a verify body, a task row, a
tool's arguments, a completion: a long agent transcript holds a few thousand); about 8 MB and
25 ms of parse at most."""
MAX_JSON_VALUES = 1_000_000
"""Values one JSON document of a request may hold, counted by its commas (a long transcript of
prose or a rollout's token ids stays below it)."""


@dataclass(frozen=True)
class JsonBounds:
    """The bounds of one kind of document; the HTTP door's body is a whole batch (every group
    of a trainer's step in one document) and has wider ones."""

    containers: int = MAX_JSON_CONTAINERS
    values: int = MAX_JSON_VALUES
    names: tuple[str, str] = ("MAX_JSON_CONTAINERS", "MAX_JSON_VALUES")


DOCUMENT = JsonBounds()

Parsed = TypeVar("Parsed")
Text = str | bytes | bytearray
"""A JSON document's text (a request body grown chunk by chunk is a bytearray)."""
Doc = TypeVar("Doc", bound=Text)


def may_exceed(text: Text, bounds: JsonBounds = DOCUMENT) -> bool:
    """Whether `text` is long enough to hold more items than a bound allows (200 kB for a
    document: two bytes an object at least)."""
    return len(text) > 2 * bounds.containers


def check_items(text: Text, field: str, row: int | None = None, bounds: JsonBounds = DOCUMENT) -> None:
    """InvalidInputError naming `field` (and `row`) when `text` holds more objects and lists or
    more values than `bounds` allow."""
    if may_exceed(text, bounds):
        counts = _counts(text, 0, len(text))
        if _past(counts, bounds):
            counts = exact_counts(text)
        _check_counts(*counts, field, row, bounds)


async def checked_items(text: Text, field: str, row: int | None = None, bounds: JsonBounds = DOCUMENT) -> None:
    """check_items, counting a long text in slices with a turn of the event loop between them
    (counting 60 MB takes about 100 ms on a slow core)."""
    if not may_exceed(text, bounds):
        return
    containers = values = 0
    for start in range(0, len(text), _SLICE):
        more_containers, more_values = _counts(text, start, start + _SLICE)
        containers, values = containers + more_containers, values + more_values
        await asyncio.sleep(0)
    if _past((containers, values), bounds):  # an upper bound: the braces and commas of text in strings counted too
        containers, values = await asyncio.to_thread(exact_counts, text)
    _check_counts(containers, values, field, row, bounds)


async def parse_bounded(
    parse: Callable[[Doc], Parsed], text: Doc, field: str, row: int | None = None, bounds: JsonBounds = DOCUMENT
) -> Parsed:
    """parse(text) once checked_items passes."""
    await checked_items(text, field, row, bounds)
    return parse(text)


_SLICE = 1 << 20


def _counts(text: Text, start: int, end: int) -> tuple[int, int]:
    if isinstance(text, str):
        return text.count("{", start, end) + text.count("[", start, end), text.count(",", start, end)
    return text.count(b"{", start, end) + text.count(b"[", start, end), text.count(b",", start, end)


def _past(counts: tuple[int, int], bounds: JsonBounds) -> bool:
    return counts[0] > bounds.containers or counts[1] > bounds.values


def exact_counts(text: Text) -> tuple[int, int]:
    """The objects and lists, and the commas, outside the document's strings: in C (`jsonscan`,
    built on install), else with numpy (a quote is a string's end unless an odd run of
    backslashes comes before it)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    try:
        from gym_metrics._util.jsonscan import count_items
    except ImportError:
        return _numpy_counts(data)
    return count_items(data, 0, len(data))


def _numpy_counts(data: bytes | bytearray) -> tuple[int, int]:
    import numpy as np

    arr = np.frombuffer(data, dtype=np.uint8)
    quotes = np.flatnonzero(arr == ord('"'))
    plain = np.flatnonzero(arr != ord("\\"))  # the last of these before a quote ends its run of backslashes
    at = np.searchsorted(plain, quotes)
    runs = quotes - np.where(at > 0, plain[np.maximum(at - 1, 0)], -1) - 1
    real = quotes[runs % 2 == 0]
    counted = []
    for chars in (b"{[", b","):
        at = np.flatnonzero(np.isin(arr, np.frombuffer(chars, dtype=np.uint8)))
        counted.append(int(np.count_nonzero(np.searchsorted(real, at) % 2 == 0)))  # an even number of quotes before: outside
    return counted[0], counted[1]


def _check_counts(containers: int, values: int, field: str, row: int | None, bounds: JsonBounds) -> None:
    for what, found, limit, name in (("objects and lists", containers, bounds.containers, bounds.names[0]),
                                     ("values", values, bounds.values, bounds.names[1])):  # fmt: skip
        if found > limit:
            raise InvalidInputError(
                f"{field} is too large a JSON document",
                [FieldViolation(field, f"up to {found:,} {what}; at most {limit:,} per document ({name})", row)],
            )


__all__ = ["DOCUMENT", "MAX_JSON_CONTAINERS", "MAX_JSON_VALUES", "JsonBounds", "check_items", "checked_items", "exact_counts", "may_exceed", "parse_bounded"]
