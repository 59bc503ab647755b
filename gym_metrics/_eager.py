"""Run a coroutine synchronously until it first suspends (Python 3.12's eager tasks, for 3.10+).

The helper of gym_metrics/_transport/_eager.py, outside the transport package so that
in-process code (evaluate) can use it without importing grpc; a Task cancelled before its
first step also closes the coroutine it was handed (its finally blocks run at once, not at
garbage collection).

Creating a Task for a coroutine that never awaits anything real costs more than the work
itself. A coroutine that finishes on its first step gives its result at once; one that
suspends is handed, where it stopped, to a Task.
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
    task = asyncio.ensure_future(_resume(coro, waiting_on))
    task.add_done_callback(lambda _: coro.close())  # cancelled before its first step: run finally blocks now
    return False, task


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
