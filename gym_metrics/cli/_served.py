"""`collect --benchmark` without `--server`: the benchmark's environment served for the run, as
`gym eval run` starts its servers: `gym-metrics serve CONFIG` in a child process on a free
loopback port, its address read from its "listening on" line, everything it says kept in a log
file, stopped when the run ends."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path

from gym_metrics.errors import FieldViolation, InvalidInputError

START_TIMEOUT_S = 300.0
"""How long an environment may take to start (NeMo Gym's server_spinup_timeout_seconds is 600;
one that loads models or sandboxes takes a while)."""
_LISTENING = re.compile(r"listening on (\S+:\d+)")


@contextlib.contextmanager
def serving(config: Path, log: Path, timeout_s: float = START_TIMEOUT_S, name: str | None = None) -> Iterator[str]:
    """The address of `gym-metrics serve CONFIG` (its block `name`) run in a child process while
    the block runs, its stderr written to `log`; InvalidInputError (with the end of what it said)
    when it exits or stays silent first. A child that exits during the run is said on exit, its
    last lines quoted."""
    command = [sys.executable, "-m", "gym_metrics.cli", "serve", str(config), "--host", "127.0.0.1", "--port", "0", *(["--name", name] if name else [])]
    shown = f"{config}{f' ({name})' if name else ''}"
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    said: deque[str] = deque(maxlen=20)
    found: list[str] = []
    ready = threading.Event()

    def read() -> None:  # its stderr kept flowing (a full pipe would stop the server): to the log, the last lines kept
        assert child.stderr is not None
        with log.open("a") as kept:
            for line in child.stderr:
                kept.write(line)
                kept.flush()
                said.append(line.rstrip())
                match = _LISTENING.search(line)
                if match and not found:
                    found.append(match.group(1))
                    ready.set()
        ready.set()  # it exited

    reader = threading.Thread(target=read, name="gym-metrics-served", daemon=True)
    reader.start()
    try:
        started = time.monotonic()
        ready.wait(timeout_s)
        if not found:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(1 if reader.is_alive() else 10)  # its stderr closed: it is exiting
            why = f"exit {child.returncode}" if child.returncode is not None else f"not listening after {time.monotonic() - started:.0f} s"
            tail = "\n".join(said) or "(it said nothing)"
            raise InvalidInputError(f"the benchmark's environment did not start ({why})", [FieldViolation("--benchmark", f"gym-metrics serve {shown}:\n{tail}")])
        print(f"collect: serving {shown} on {found[0]} for this run (its log: {log})", file=sys.stderr)
        yield found[0]
    finally:
        if found and child.poll() is not None:  # it stopped by itself: what the run's errors came from
            reader.join(5)
            tail = "\n  ".join(said)
            print(f"collect: the served environment exited during the run (exit {child.returncode}): {shown}; its last lines:\n  {tail}", file=sys.stderr)
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
