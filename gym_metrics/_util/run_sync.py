"""Running a coroutine to its end from synchronous code, whether or not the calling thread
already runs an event loop (a trainer's callback called from a notebook does)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(coro)`, in a thread of its own when this thread's loop is running (where
    `asyncio.run` would refuse)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(1, thread_name_prefix="gym-metrics run_sync") as pool:
        return pool.submit(asyncio.run, coro).result()
