"""A deadline for CPU-bound code running in the main thread (a scorer evaluating a model's
answer): it is interrupted at the next bytecode, or inside CPython's long arithmetic, which
checks for signals (`9**9**9**9` ran forever, holding the GIL and with it the whole server).

A CPU-time timer (ITIMER_VIRTUAL, SIGVTALRM; not pytest-timeout's SIGALRM) ticks every TICK_S
of the process's CPU once the first deadline is asked for, and its handler stops a block past
its deadline; a block itself only notes its deadline (no system call: scorers run by the
thousand a second). The exception is a BaseException, so a library's `except Exception` does
not swallow it. Off the main thread (signals are the main thread's), or where another handler
owns SIGVTALRM, the block runs unbounded."""

from __future__ import annotations

import atexit
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

TICK_S = 0.1
"""CPU seconds between two looks at the running block's deadline."""


class DeadlineExceeded(BaseException):
    """The code ran past its deadline and was stopped."""


_running: list[tuple[float, float]] = []
"""(deadline on the monotonic clock, seconds given) of the block running now."""
_ticking: list[bool] = []


def _on_tick(signum: int, frame: FrameType | None) -> None:
    if _running and time.monotonic() >= _running[0][0]:
        _, seconds = _running.pop()
        raise DeadlineExceeded(f"stopped after {seconds:g} s")


def _tick() -> bool:
    """The timer started (once, stopped at exit: Python puts SIGVTALRM's default back as it
    finalizes, and that default ends the process); False when another handler owns SIGVTALRM."""
    if not _ticking:
        if signal.getsignal(signal.SIGVTALRM) not in (signal.SIG_DFL, None):
            return False
        signal.signal(signal.SIGVTALRM, _on_tick)
        signal.setitimer(signal.ITIMER_VIRTUAL, TICK_S, TICK_S)
        atexit.register(signal.setitimer, signal.ITIMER_VIRTUAL, 0)
        _ticking.append(True)
    return signal.getsignal(signal.SIGVTALRM) is _on_tick


@contextmanager
def cpu_deadline(seconds: float) -> Iterator[None]:
    """Run the block with `seconds` of wall time at most (DeadlineExceeded past it, seen at the
    next tick); a no-op off the main thread, inside another deadline, or for `seconds` <= 0."""
    if seconds <= 0 or _running or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer") or not _tick():
        yield
        return
    _running.append((time.monotonic() + seconds, seconds))
    try:
        yield
    finally:
        _running.clear()
