"""Run CPU-bound work in a thread of its own that the caller can cancel, memory included.

A call's aggregation can take seconds of CPU. Run on the event loop it would stall every other
call (health checks, small verifies); run in a pool thread it could not be stopped when the
client gives up, and would keep its memory until it finished. Here the work runs in a
dedicated daemon thread: when the awaiting task is cancelled, an exception is raised inside
the thread at its next Python bytecode (CPython's `PyThreadState_SetAsyncExc`), which unwinds
engine code and user code alike; C calls in between are bounded by the call's limits. Freed
memory is then handed back to the OS (`malloc_trim`), so RSS drops, not just the heap.
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import threading
from collections.abc import Callable
from typing import TypeVar

from gym_metrics._util.memory import trim_heap

T = TypeVar("T")

_STOP_WAIT_S = 5.0
"""How long a cancelled caller waits for the thread to unwind before giving up on it."""


class WorkCancelled(BaseException):
    """Raised inside a worker thread whose caller went away (BaseException: not swallowed by
    `except Exception` in user code)."""


async def run_cancellable(fn: Callable[[], T], name: str = "gym-metrics-work") -> T:
    """`fn()` in a new thread; cancelling the awaiting task stops the thread too."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    finished = threading.Event()

    def settle(ok: bool, value: object) -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)  # type: ignore[arg-type]
        else:
            future.set_exception(value)  # type: ignore[arg-type]

    running = threading.Event()  # set while fn runs: the only time a stop is injected
    running.set()

    def work() -> None:
        try:
            try:
                result = fn()
            except WorkCancelled:
                running.clear()
                return
            except BaseException as exc:  # handed to the caller, who decides
                running.clear()
                _call_soon(loop, settle, False, exc)
            else:
                running.clear()
                _call_soon(loop, settle, True, result)
        except WorkCancelled:  # landed just as the work ended
            pass
        finally:
            running.clear()
            finished.set()

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        await _stop(thread, running, finished)
        if future.done() and not future.cancelled():
            future.exception()  # finished meanwhile: nobody wants it, say so to asyncio
        raise


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[..., None], *args: object) -> None:
    try:
        loop.call_soon_threadsafe(callback, *args)
    except RuntimeError:  # the loop is closed: nobody is waiting any more
        pass


async def _stop(thread: threading.Thread, running: threading.Event, finished: threading.Event) -> None:
    """Raise WorkCancelled in the thread (again, in case it lands in a `finally` or an
    `except BaseException`) until it ends; then give the freed memory back."""
    deadline = asyncio.get_running_loop().time() + _STOP_WAIT_S
    while not finished.is_set() and asyncio.get_running_loop().time() < deadline:
        if thread.ident is not None and running.is_set():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(WorkCancelled))
        await asyncio.sleep(0.05)
    # The caller's frames still hold the work's inputs: trim once they have unwound.
    loop = asyncio.get_running_loop()
    for delay in (0.1, 1.0):
        loop.call_later(delay, release_memory)


def release_memory() -> None:
    """Collect cycles and return free heap pages to the OS (glibc only; a no-op elsewhere)."""
    gc.collect()
    trim_heap()


__all__ = ["WorkCancelled", "release_memory", "run_cancellable"]
