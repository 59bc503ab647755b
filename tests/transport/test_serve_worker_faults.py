"""`gym-metrics serve --workers N` when a worker dies or cannot start, when the port cannot be
reserved, and when the environment's code leaves a thread running: one error line naming what
happened, an exit code that says which (a worker that died serving is a failure, exit 1; not
bad input, exit 2), the other workers stopped, and never a hang."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gym_metrics.errors import InvalidInputError

pytestmark = pytest.mark.timeout(120)

EXITS_AT_START = """
import os
from gym_metrics.environments import SimpleResourcesServer
class Env(SimpleResourcesServer):
    async def astart(self):
        os._exit(3)
    async def verify(self, body):
        return {"reward": 1.0}
"""

LEAVES_A_THREAD = """
import threading, time
from gym_metrics.environments import SimpleResourcesServer
class Env(SimpleResourcesServer):
    async def astart(self):
        threading.Thread(target=time.sleep, args=(120,), name="stuck-helper").start()
    async def verify(self, body):
        return {"reward": 1.0}
"""


class Serve:
    """A `gym-metrics serve` subprocess in a session of its own (killed whole at the end)."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "gym_metrics.cli", "serve", *args], stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)  # fmt: skip
        self.said: list[str] = []

    def until(self, words: str, timeout: float = 60) -> None:
        assert self.proc.stderr is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            self.said.append(line)
            if words in line or not line:
                return
        raise AssertionError(f"no {words!r} within {timeout} s: {self.said}")

    def workers(self) -> list[int]:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and (entry / "stat").read_text().rsplit(")", 1)[1].split()[1] == str(self.proc.pid):
                    found.append(int(entry.name))
            except OSError:
                continue
        return sorted(found)

    def end(self, timeout: float = 30) -> tuple[int, str]:
        assert self.proc.stderr is not None
        rest = self.proc.stderr.read()  # until it exits (bounded by the test's timeout)
        return self.proc.wait(timeout=timeout), "".join(self.said) + rest

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


@pytest.fixture
def serves() -> Iterator[list[Serve]]:
    started: list[Serve] = []
    yield started
    for serve in started:
        serve.kill()


def test_serve_refuses_fewer_than_one_worker_naming_the_field() -> None:
    from gym_metrics import serve

    with pytest.raises(InvalidInputError) as refused:
        serve("math_exact", workers=0, port=0)
    assert [(v.field, v.description) for v in refused.value.violations] == [("workers", "must be >= 1, got 0")]


def test_a_killed_worker_stops_the_others_and_the_serve_fails_naming_it(serves: list[Serve]) -> None:
    serve = Serve("math_exact", "--workers", "2", "--port", "0", "--host", "127.0.0.1")
    serves.append(serve)
    serve.until("listening on")
    workers = serve.workers()
    assert len(workers) == 2
    started = time.monotonic()
    os.kill(workers[0], signal.SIGKILL)
    code, said = serve.end()
    assert code == 1, said
    assert time.monotonic() - started < 20
    assert "exited with code -9; stopping the others" in said
    errors = [line for line in said.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: gym-metrics workers failed: gym-metrics-worker-") and errors[0].endswith("(exit code -9)")
    assert "Traceback" not in said


def test_workers_that_exit_before_they_are_up_fail_the_serve_without_a_listening_line(serves: list[Serve], tmp_path: Path) -> None:
    app = tmp_path / "exits.py"
    app.write_text(EXITS_AT_START)
    serve = Serve(f"{app}:Env", "--workers", "2", "--port", "0", "--host", "127.0.0.1")
    serves.append(serve)
    code, said = serve.end(timeout=60)
    assert code == 1, said
    assert "listening on" not in said and "Traceback" not in said
    assert "error: gym-metrics workers failed: gym-metrics-worker-1 (exit code 3), gym-metrics-worker-2 (exit code 3)" in said.splitlines()


def test_a_port_that_cannot_be_reserved_is_one_error_line(serves: list[Serve]) -> None:
    serve = Serve("math_exact", "--workers", "2", "--port", "0", "--host", "192.0.2.1")  # TEST-NET-1: no local address
    serves.append(serve)
    code, said = serve.end(timeout=60)
    assert code == 2, said
    assert said.strip().splitlines() == ["error: gym-metrics cannot reserve a port on 192.0.2.1: [Errno 99] Cannot assign requested address"]


def test_a_worker_whose_environment_left_a_thread_running_still_exits_on_sigterm(serves: list[Serve], tmp_path: Path) -> None:
    app = tmp_path / "thread.py"
    app.write_text(LEAVES_A_THREAD)
    serve = Serve(f"{app}:Env", "--workers", "2", "--port", "0", "--host", "127.0.0.1", "--grace", "0.5")
    serves.append(serve)
    serve.until("listening on")
    started = time.monotonic()
    serve.proc.send_signal(signal.SIGTERM)
    code, said = serve.end()
    assert code == 0, said
    assert time.monotonic() - started < 20  # the thread sleeps 120 s: not waited for
    left = [line for line in said.splitlines() if "still running" in line]
    assert left == ["gym-metrics: 1 thread(s) of the environment's code still running (stuck-helper): exiting without them"] * 2
