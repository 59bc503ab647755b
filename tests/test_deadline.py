"""A deadline for CPU-bound code in the main thread (gym_metrics/_util/deadline.py): it stops
code inside CPython's long arithmetic, does nothing off the main thread, and its CPU-time
timer is stopped at exit (Python puts SIGVTALRM's default back as it finalizes, and a tick
then ended the process: `demo --reasoning-gym` exited -26)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from gym_metrics._util.deadline import DeadlineExceeded, cpu_deadline


def test_a_deadline_stops_cpu_bound_code_and_is_none_off_the_main_thread() -> None:
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded), cpu_deadline(0.3):
        pow(7, 10**9)  # CPython's long arithmetic checks for signals
    assert time.monotonic() - started < 5
    ran: list[int] = []

    def elsewhere() -> None:
        with cpu_deadline(0.01):
            time.sleep(0.1)
            ran.append(1)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join(5)
    assert ran == [1]


def test_the_timer_is_stopped_before_the_interpreter_puts_the_default_back() -> None:
    script = (
        "import atexit, signal, time\n"
        "def last():  # registered first: runs after every later atexit handler, as finalization would\n"
        "    signal.signal(signal.SIGVTALRM, signal.SIG_DFL)\n"
        "    end = time.process_time() + 0.5\n"
        "    while time.process_time() < end: pass\n"
        "atexit.register(last)\n"
        "from gym_metrics._util.deadline import cpu_deadline\n"
        "with cpu_deadline(5): sum(range(1000))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert done.returncode == 0, (done.returncode, done.stderr[-500:])
