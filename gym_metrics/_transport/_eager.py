"""Run a coroutine synchronously until it first suspends (Python 3.12's eager tasks, for 3.10+).

Most verify() implementations never await anything real; creating a Task for each of them
costs more than the verify itself. A coroutine that finishes on its first step gives its
result at once; one that suspends is handed, where it stopped, to a Task.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_eagerly(coro: Coroutine[Any, Any, T]) -> tuple[bool, T | asyncio.Future[T]]:
    """(True, result) when the coroutine completed on its first step, else (False, task)."""
    try:
        waiting_on = coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    return False, asyncio.ensure_future(_resume(coro, waiting_on))


async def _resume(coro: Coroutine[Any, Any, T], waiting_on: Any) -> T:
    return await _drive(coro, waiting_on)


@types.coroutine
def _drive(coro: Coroutine[Any, Any, T], waiting_on: Any) -> Generator[Any, Any, T]:
    """Yield what the coroutine waits on to the Task running us, and feed back what it sends."""
    while True:
        try:
            sent = yield waiting_on
        except BaseException as exc:  # cancellation and errors thrown in by the Task
            try:
                waiting_on = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                waiting_on = coro.send(sent)
            except StopIteration as stop:
                return stop.value
