"""The bytes of policy answers one process holds at once (collect's bound on big answers)."""

from __future__ import annotations

import asyncio
import time
import weakref
from typing import Any


class ByteBudget:
    """Bytes of answers held at once, shared by the requests of one process (collect's): a
    body is read only when it fits in what is left (its Content-Length; an answer of unknown
    length waits for any room, then is counted as it comes). Answers leave the budget when
    the objects holding them are freed (`hold`). Every size counts `factor` times: what an
    answer costs once parsed (collect holds a rollout's row and its encoded body, so 2).
    Waiting never deadlocks: a read goes on when nothing is held, and after `patience`
    seconds whatever is held (then past the budget)."""

    def __init__(self, capacity: int, factor: int = 1) -> None:
        self.capacity, self.factor = capacity, factor
        self.held = 0
        self.peak = 0
        """Most bytes held at once (for tests and the memory benchmark)."""
        self._waiters: list[asyncio.Future[None]] = []

    def fits(self, size: int) -> bool:
        """Whether `take(size)` goes on at once (no wait for room)."""
        return not self.held or self.held + size * self.factor <= self.capacity

    async def take(self, size: int, patience: float) -> float:
        """Count `size` bytes once they fit; the seconds spent waiting for room."""
        started, size = time.monotonic(), size * self.factor
        while self.held and self.held + size > self.capacity and time.monotonic() - started < patience:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await asyncio.wait_for(asyncio.shield(waiter), max(0.0, patience - (time.monotonic() - started)))
            except asyncio.TimeoutError:
                break
        self.held += size
        self.peak = max(self.peak, self.held)
        return time.monotonic() - started

    def add(self, size: int) -> None:
        """Count `size` more bytes (no wait: what is already read)."""
        self.held += size * self.factor
        self.peak = max(self.peak, self.held)

    def release(self, size: int) -> None:
        self.held -= size * self.factor
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def hold(self, owner: Any, size: int) -> None:
        """Count `size` bytes until `owner` is freed (a generated rollout: until it is written
        and dropped, wherever it is in between)."""
        self.add(size)
        weakref.finalize(owner, self.release, size)


__all__ = ["ByteBudget"]
