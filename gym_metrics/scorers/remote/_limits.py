"""The per-render budget that bounds what a body template may build, and the checks using it.

One `Budget` lives for one body render (set with `rendering(...)`). Every hook of the bounded
sandbox (gym_metrics/scorers/remote/_sandbox.py) charges it: steps (operators, calls, filters, loop
iterations, elements measured), characters built in total, and characters output. Sizes are
lower bounds of the JSON/text a value becomes (a character is at least one byte), so a check
never refuses a value that fits. A refusal raises `TemplateLimitError` naming the limit.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from jinja2.sandbox import SecurityError
from jinja2.utils import Cycler, Namespace

DEFAULT_MAX_BODY_BYTES = 1_048_576
"""Default `max_body_bytes`: 1 MiB."""
MAX_RANGE = 10_000
"""Most items one `range(...)` may have (Jinja's own sandbox allows 100,000)."""
MAX_INT_BITS = 4_096
"""Largest integer an operator may build, in bits (about 1,233 decimal digits)."""
BASE_STEPS = 1_000_000
"""Steps a render may take on top of one per body byte allowed."""
BUILT_FACTOR = 16
"""A render may build at most this many times `max_body_bytes` characters in total."""
MAX_RENDER_SECONDS = 1.0
"""Wall-clock time one body render may take (checked every CLOCK_STEPS steps): renders run on the
event loop, and the step budget alone allows a few seconds of slow steps (macro calls)."""
CLOCK_STEPS = 4096


class TemplateLimitError(SecurityError):
    """The template would go past a documented limit; the message names it."""


class Budget:
    """What one body render may still do."""

    def __init__(self, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.max_bytes = max_body_bytes
        self.max_steps = BASE_STEPS + max_body_bytes
        self.max_built = BUILT_FACTOR * max_body_bytes
        self.steps = self.built = self.output = 0
        self.deadline = time.monotonic() + MAX_RENDER_SECONDS
        self._next_clock = CLOCK_STEPS

    def step(self, count: int = 1) -> None:
        """Charge `count` steps (CPU): operators, calls, filters, loop items, measured elements."""
        self.steps += count
        if self.steps > self.max_steps:
            raise TemplateLimitError(f"the template took more than {self.max_steps:,} steps")
        if self.steps >= self._next_clock:
            self._next_clock = self.steps + CLOCK_STEPS
            if time.monotonic() > self.deadline:
                raise TemplateLimitError(f"the template ran for more than {MAX_RENDER_SECONDS:g} s (MAX_RENDER_SECONDS)")

    def fits(self, size: int, what: str) -> None:
        """Refuse, before building it, a value of `size` characters above max_body_bytes."""
        if size > self.max_bytes:
            raise TemplateLimitError(f"{what} would build {size:,} characters, over max_body_bytes ({self.max_bytes:,})")

    def build(self, size: int, what: str) -> None:
        """`fits`, then charge `size` to the total a render may build (garbage included)."""
        self.fits(size, what)
        self.built += size
        if self.built > self.max_built:
            raise TemplateLimitError(
                f"the template built more than {self.max_built:,} characters in total ({BUILT_FACTOR} x max_body_bytes)"
            )

    def emit(self, size: int) -> None:
        """Charge `size` characters of rendered output to the whole body."""
        self.output += size
        if self.output > self.max_bytes:
            raise TemplateLimitError(f"the rendered body exceeds max_body_bytes ({self.max_bytes:,})")


_CURRENT: ContextVar[Budget | None] = ContextVar("gym_metrics_template_budget", default=None)


def current() -> Budget:
    """The running render's budget; outside a render (constant folding at compile time) a
    fresh default one, so the same per-value limits apply."""
    return _CURRENT.get() or Budget()


@contextmanager
def rendering(budget: Budget) -> Iterator[Budget]:
    """Make `budget` the current one for the enclosed (synchronous) render."""
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def rendered_size(value: Any, limit: int, budget: Budget) -> int:
    """A lower bound of the length of `value` as text or JSON, measured until it passes
    `limit` (so at most about `limit` elements are visited; each one is charged as a step).
    Shared references count each time they appear, as they would when serialised."""
    total, visited = 0, 0
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack and total <= limit:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
            continue
        visited += 1
        total += 1 + _leaf_size(item)
        children = _children(item)
        if children is not None:
            stack.append(children)
    budget.step(visited)
    return total


_END = object()


def _leaf_size(item: Any) -> int:
    if isinstance(item, (str, bytes)):
        return len(item)
    if isinstance(item, bool) or item is None:
        return 3
    if isinstance(item, int):
        return item.bit_length() // 4
    return 1


def _children(item: Any) -> Iterator[Any] | None:
    if isinstance(item, Mapping):
        return iter(item.items())
    if isinstance(item, (list, tuple, set, frozenset)):
        return iter(item)
    if isinstance(item, Namespace):  # its attributes print with it
        return iter(object.__getattribute__(item, "__dict__").values())
    if isinstance(item, Cycler):  # `cycler(x, x).items` is a list of its arguments
        return iter(item.items)
    return None


def size_of(value: Any) -> int:
    """Length of a text value, or one element per item of a container (0 otherwise)."""
    if isinstance(value, (str, bytes, list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


def check_int(bits: int, operator: str) -> None:
    """Refuse an integer result of about `bits` bits above MAX_INT_BITS."""
    if bits > MAX_INT_BITS:
        raise TemplateLimitError(f"{operator!r} would build an integer of about {bits:,} bits, over {MAX_INT_BITS:,} bits")


def check_count(count: int, limit: int, what: str) -> None:
    """Refuse a count (a width, a repeat, a number of slices) above `limit`."""
    if count > limit:
        raise TemplateLimitError(f"{what} of {count:,} is over the limit of {limit:,}")
