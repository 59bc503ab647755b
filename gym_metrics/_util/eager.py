"""Start a coroutine eagerly: its first step runs now, and a coroutine that never suspends
costs no Task (creating one costs more than a typical verify or row score).

On Python 3.12+ this is a real eager Task (asyncio.eager_task_factory): the first step runs
inside the Task itself, so code that depends on its task's identity (anyio / httpx cancel
scopes, asyncio.timeout) is safe. Before 3.12 the first step can only run in the caller's
task, which such code cannot survive, so it is done only when the caller vouches for the
coroutine (`trusted=True`: pure CPU work, like math_exact's verify); otherwise a plain Task.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def start_eagerly(coro: Coroutine[Any, Any, T], trusted: bool = False) -> tuple[bool, T | asyncio.Future[T]]:
    """(True, result) when the coroutine completed on its first step, else (False, task)."""
    if sys.version_info >= (3, 12):
        task = asyncio.eager_task_factory(asyncio.get_running_loop(), coro)  # type: ignore[attr-defined]
        if task.done() and not task.cancelled() and task.exception() is None:
            return True, task.result()
        return False, task
    if not trusted:
        return False, asyncio.ensure_future(coro)
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
