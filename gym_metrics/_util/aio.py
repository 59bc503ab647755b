"""asyncio helpers shared across the package."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

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
