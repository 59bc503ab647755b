"""asyncio helpers shared across the package."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def gather_all(*calls: Awaitable[T]) -> list[T]:
    """Like asyncio.gather, but the first failure cancels the other calls: no request outlives
    the work that made it, and no answer is made from part of the calls."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def run_fast(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on uvloop's event loop where it is installed (Linux and macOS
    installs have it): a policy call of collect's agent loop costs a third less CPU there
    (BENCHMARKS.md, "Several collector processes"). `GYM_METRICS_EVENT_LOOP=asyncio` keeps
    asyncio's own loop."""
    if os.environ.get("GYM_METRICS_EVENT_LOOP", "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.run(main)
    return asyncio.run(main)


def run_past_exits(main: Coroutine[Any, Any, T], said: Callable[[SystemExit], None]) -> T:
    """`asyncio.run(main)`, except that a task other than `main` ending in SystemExit (code
    calling `sys.exit()` in a task it made, or one a library made for it: asyncio raises that
    out of the loop, which would end the process and every call in it) is told to `said` and
    the loop runs on. `main`'s own SystemExit ends the run as usual."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task = loop.create_task(main)
    try:
        while True:
            try:
                return loop.run_until_complete(task)
            except SystemExit as exc:
                if task.done():
                    raise
                said(exc)
    finally:
        try:
            rest = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in rest:
                t.cancel()
            loop.run_until_complete(asyncio.gather(*rest, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


class Busy(Awaitable[T]):
    """A coroutine that counts the time it spends running (`seconds`), not waiting: what it held
    the event loop for, which no timeout can interrupt (synchronous work inside it)."""

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self.coro, self.seconds = coro, 0.0

    def __await__(self) -> Any:
        send, throw, clock = self.coro.send, self.coro.throw, time.perf_counter
        value: Any = None
        error: BaseException | None = None
        while True:
            start = clock()
            try:
                step = send(value) if error is None else throw(error)
            except StopIteration as stop:
                self.seconds += clock() - start
                return stop.value
            except BaseException:
                self.seconds += clock() - start
                raise
            self.seconds += clock() - start
            try:
                value, error = (yield step), None
            except BaseException as exc:  # thrown in (a cancel): passed on to the coroutine
                value, error = None, exc
