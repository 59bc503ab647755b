"""The lean pool's request bounds (gym_metrics/targets/_limits.py): at most `size` requests at
once, first come first served, and a deadline per request that ends it as a timeout (a cancel
from elsewhere stays a cancel; a wait for the byte budget does not count)."""

from __future__ import annotations

import asyncio
import time

import pytest

from gym_metrics.targets._budget import ByteBudget
from gym_metrics.targets._limits import Deadlines, Slots
from gym_metrics.targets._wire import WirePool, WireTimeout

pytestmark = pytest.mark.timeout(30)


async def test_slots_bound_the_running_and_serve_waiters_in_order() -> None:
    slots, running, peak, order = Slots(3), 0, 0, []

    async def worker(i: int) -> None:
        nonlocal running, peak
        await slots.take()
        order.append(i)
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01)
        running -= 1
        slots.give()

    await asyncio.gather(*(worker(i) for i in range(12)))
    assert peak == 3 and order == list(range(12)) and slots.free == 3


async def test_a_cancelled_waiter_keeps_no_slot() -> None:
    slots = Slots(1)
    await slots.take()
    waiting = [asyncio.ensure_future(slots.take()) for _ in range(3)]
    await asyncio.sleep(0)
    waiting[0].cancel()  # still waiting: leaves the queue
    slots.give()  # hands the slot to waiting[1] ...
    waiting[1].cancel()  # ... which is cancelled before it runs: the slot goes on to waiting[2]
    await asyncio.gather(*waiting, return_exceptions=True)
    assert waiting[2].done() and not waiting[2].cancelled() and slots.free == 0
    slots.give()
    assert slots.free == 1


async def test_a_deadline_cancels_its_task_within_a_grain_and_says_it_timed_out() -> None:
    deadlines = Deadlines(0.1)

    async def request() -> str:
        deadline = deadlines.start()
        try:
            await asyncio.sleep(10)
            return "answered"
        except asyncio.CancelledError:
            return "timed out" if deadlines.timed_out(deadline) else "cancelled"
        finally:
            deadlines.stop(deadline)

    start = time.monotonic()
    assert await request() == "timed out"
    assert 0.1 <= time.monotonic() - start < 0.1 + deadlines.grain + 0.1
    other = asyncio.ensure_future(request())
    await asyncio.sleep(0.01)
    other.cancel()
    assert await other == "cancelled"  # not ours: stays a cancel


async def test_a_resumed_deadline_with_less_time_is_kept_on_time() -> None:
    """The timer is armed for a deadline a second away; one resumed with 0.1 s left must not
    wait for it."""
    deadlines = Deadlines(1.0)
    long_one = deadlines.start()

    async def resumed() -> None:
        deadline = deadlines.start()
        deadlines.resume(deadline, deadlines.pause(deadline) - 0.9)  # 0.1 s left
        await asyncio.sleep(10)

    start = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.ensure_future(resumed())
    assert time.monotonic() - start < 0.5
    deadlines.stop(long_one)


async def test_the_pool_times_out_a_silent_server_and_frees_its_slot() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)
        await asyncio.sleep(5)
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    pool = WirePool(url, 1, 0.2)
    try:
        start = time.monotonic()
        outcomes = await asyncio.gather(*(pool.post(url + "/x", b"{}", {}) for _ in range(2)), return_exceptions=True)
        took = time.monotonic() - start
    finally:
        await pool.aclose()
        server.close()
    assert [type(o) for o in outcomes] == [WireTimeout, WireTimeout]
    assert 0.4 <= took < 1.5  # one at a time (size 1), each its own 0.2 s


async def test_the_budget_wait_does_not_count_against_the_deadline() -> None:
    """A full byte budget: the answer's head comes at once, its body 0.9 s later; the read
    waits 0.5 s for room, then its 0.6 s deadline goes on from where it stopped (due at 1.1 s),
    so the body arrives in time (counted from the start it would be 0.3 s late)."""
    body = b'{"x":"' + b"y" * 290 + b'"}'

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
        await asyncio.sleep(0.9)
        writer.write(body)
        await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    budget = ByteBudget(100)
    budget.add(100)  # someone else's answer fills it
    pool = WirePool(url, 1, 0.6, budget=budget)
    try:
        request = asyncio.ensure_future(pool.post(url + "/x", b"{}", {}))
        await asyncio.sleep(0.5)
        budget.release(100)
        status, _, answer = await request
    finally:
        await pool.aclose()
        server.close()
    assert status == 200 and bytes(answer) == body and budget.held == 0


def test_deadlines_follow_their_task_across_loops() -> None:
    """Deadlines keep the loop of their last start (asking for the running loop is a system call
    on Python 3.11); a start on another loop, or in another task, still binds its own task."""
    deadlines = Deadlines(0.05)

    async def request() -> tuple[bool, bool]:
        deadline = deadlines.start()
        try:
            await asyncio.sleep(5)
            return deadline.task is asyncio.current_task(), False
        except asyncio.CancelledError:
            return deadline.task is asyncio.current_task(), deadlines.timed_out(deadline)
        finally:
            deadlines.stop(deadline)

    async def two_tasks() -> list[tuple[bool, bool]]:
        return list(await asyncio.gather(request(), request()))

    for _ in range(2):  # a loop each: the second starts with the first's (closed) loop kept
        assert asyncio.run(two_tasks()) == [(True, True), (True, True)]
