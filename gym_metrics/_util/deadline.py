"""A deadline for CPU-bound code running in the main thread (a scorer evaluating a model's
answer): SIGALRM interrupts it at the next bytecode, or inside CPython's long arithmetic, which
checks for signals (`9**9**9**9` ran forever, holding the GIL and with it the whole server).
The exception is a BaseException so that a library's `except Exception` does not swallow it.
Elsewhere than the main thread (signals are the main thread's) the code runs unbounded."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class DeadlineExceeded(BaseException):
    """The code ran past its deadline and was stopped."""


@contextmanager
def cpu_deadline(seconds: float) -> Iterator[None]:
    """Run the block with `seconds` of wall time at most (DeadlineExceeded past it); a no-op
    off the main thread, or for `seconds` <= 0."""
    if seconds <= 0 or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    armed = [True]

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if armed[0]:  # (a late alarm, after the block, is ignored)
            armed[0] = False
            raise DeadlineExceeded(f"stopped after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
