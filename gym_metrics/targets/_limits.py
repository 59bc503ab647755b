"""How many requests a lean pool runs at once, and how long each may take, for a few hundred
nanoseconds a request: at collect's rates `asyncio.Semaphore` (a generator per acquire) and
`asyncio.timeout` (a context manager and a timer per request, about 7 us) cost a sixth of a
policy call's CPU.
"""

from __future__ import annotations

import asyncio
import collections
import math


class Slots:
    """A counting semaphore, first come first served: a free slot is taken without a
    coroutine; a freed one goes straight to the longest waiter."""

    def __init__(self, size: int) -> None:
        self.free = size
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    async def take(self) -> None:
        if self.free > 0:
            self.free -= 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a slot as it was cancelled: pass it on
            else:
                self._waiters.remove(waiter)
            raise

    def give(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.free += 1


class Deadline:
    """One request's place in `Deadlines`."""

    __slots__ = ("task", "due", "key", "expired")

    def __init__(self, task: asyncio.Task[object], due: float, key: int) -> None:
        self.task, self.due, self.key, self.expired = task, due, key, False


class Deadlines:
    """Requests that must finish within `timeout_s`, kept in buckets of `grain` seconds (a set
    add and discard a request); one timer a grain, while any are running, cancels the tasks of
    the buckets past due. A request expires at most a grain late: `timeout_s / 20`, between
    5 ms and 250 ms."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.grain = min(0.25, max(0.005, timeout_s / 20))
        self._buckets: dict[int, set[Deadline]] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        """The loop of the last start: asking for the running one is a getpid() system call on
        Python 3.11, and a loop with no task of ours running is asked again."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop of the last start (the running one, while a request of it runs)."""
        assert self._loop is not None, "no deadline started"
        return self._loop

    def start(self) -> Deadline:
        """The running task's deadline, the timeout from now."""
        loop = self._loop
        task = asyncio.current_task(loop) if loop is not None else None
        if task is None:
            loop = self._loop = asyncio.get_running_loop()
            task = asyncio.current_task(loop)
        assert task is not None and loop is not None
        due = loop.time() + self.timeout_s
        deadline = Deadline(task, due, math.ceil(due / self.grain))
        self._join(deadline, loop)
        return deadline

    def pause(self, deadline: Deadline) -> float:
        """Take `deadline` out while its request waits on something not counted; the seconds
        it has left (for `resume`)."""
        self.stop(deadline)
        return deadline.due - deadline.task.get_loop().time()

    def resume(self, deadline: Deadline, left: float) -> None:
        """Run `deadline` again after a `pause`, `left` seconds from now."""
        loop = deadline.task.get_loop()
        deadline.due = loop.time() + left
        deadline.key = math.ceil(deadline.due / self.grain)
        self._join(deadline, loop)

    def stop(self, deadline: Deadline) -> None:
        """Take `deadline` out: its request ended."""
        bucket = self._buckets.get(deadline.key)
        if bucket is not None:
            bucket.discard(deadline)
            if not bucket:
                del self._buckets[deadline.key]

    def timed_out(self, deadline: Deadline) -> bool:
        """After a CancelledError: whether it was this deadline's (and only its: a cancel from
        elsewhere as well stays a cancel)."""
        if not deadline.expired:
            return False
        uncancel = getattr(deadline.task, "uncancel", None)  # Python 3.11+
        return uncancel is None or uncancel() == 0

    def _join(self, deadline: Deadline, loop: asyncio.AbstractEventLoop) -> None:
        bucket = self._buckets.get(deadline.key)
        if bucket is None:
            bucket = self._buckets[deadline.key] = set()
        bucket.add(deadline)
        at = deadline.key * self.grain
        if self._timer is not None and at < self._timer.when():  # resumed with less time than the rest
            self._timer.cancel()
            self._timer = None
        if self._timer is None:
            self._timer = loop.call_at(at, self._sweep)

    def _sweep(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for key in [k for k in self._buckets if k * self.grain <= now]:
            for deadline in self._buckets.pop(key):
                deadline.expired = True
                deadline.task.cancel()
        if self._buckets:
            self._timer = loop.call_at(min(self._buckets) * self.grain, self._sweep)
