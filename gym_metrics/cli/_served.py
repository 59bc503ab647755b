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

from gym_metrics._util.lifetime import with_parent
from gym_metrics.errors import FieldViolation, InvalidInputError

START_TIMEOUT_S = 300.0
"""How long an environment may take to start (NeMo Gym's server_spinup_timeout_seconds is 600;
one that loads models or sandboxes takes a while)."""
_LISTENING = re.compile(r"listening on (\S+:\d+)")


class _Served:
    """`gym-metrics serve CONFIG [--name BLOCK]` in a child process, started at once; its stderr
    kept flowing into `log` (a full pipe would stop the server), its last lines kept."""

    def __init__(self, config: Path, log: Path, name: str | None) -> None:
        command = [sys.executable, "-m", "gym_metrics.cli", "serve", str(config), "--host", "127.0.0.1", "--port", "0", *(["--name", name] if name else [])]
        self.shown, self.log = f"{config}{f' ({name})' if name else ''}", log
        self.child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                      env=with_parent())  # it dies with this run, SIGKILL too (serve calls die_with_parent)
        self.said: deque[str] = deque(maxlen=20)
        self.found: list[str] = []
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, name="gym-metrics-served", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.child.stderr is not None
        with self.log.open("a") as kept:
            for line in self.child.stderr:
                kept.write(line)
                kept.flush()
                self.said.append(line.rstrip())
                match = _LISTENING.search(line)
                if match and not self.found:
                    self.found.append(match.group(1))
                    self.ready.set()
        self.ready.set()  # it exited

    def address(self, deadline: float) -> str:
        """Its address once it listens; InvalidInputError (with the end of what it said) when it
        exits or stays silent until `deadline` (time.monotonic)."""
        self.ready.wait(max(0.0, deadline - time.monotonic()))
        if not self.found:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.child.wait(1 if self.reader.is_alive() else 10)  # its stderr closed: it is exiting
            why = f"exit {self.child.returncode}" if self.child.returncode is not None else "not listening in time"
            tail = "\n".join(self.said) or "(it said nothing)"
            raise InvalidInputError(f"the benchmark's environment did not start ({why})", [FieldViolation("--benchmark", f"gym-metrics serve {self.shown}:\n{tail}")])
        print(f"collect: serving {self.shown} on {self.found[0]} for this run (its log: {self.log})", file=sys.stderr)
        return self.found[0]

    def stop(self) -> None:
        """Stopped; one that had stopped by itself during the run is said, its last lines quoted."""
        if self.found and self.child.poll() is not None:  # what the run's errors came from
            self.reader.join(5)
            tail = "\n  ".join(self.said)
            print(f"collect: the served environment exited during the run (exit {self.child.returncode}): {self.shown}; its last lines:\n  {tail}", file=sys.stderr)
        self.child.terminate()
        try:
            self.child.wait(10)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()


@contextlib.contextmanager
def serving(config: Path, logs: dict[str | None, Path], timeout_s: float = START_TIMEOUT_S) -> Iterator[dict[str | None, str]]:
    """Each resources server block of `logs` (None: the config's one) served from `config` in a
    child process of its own while the block runs, all started at once, each one's stderr in its
    log: their addresses by block. InvalidInputError (with the end of what it said) for one that
    exits or stays silent first; one that exits during the run is said on exit."""
    started = [_Served(config, log, name) for name, log in logs.items()]
    try:
        deadline = time.monotonic() + timeout_s
        yield {name: served.address(deadline) for name, served in zip(logs, started)}
    finally:
        for served in started:
            served.stop()
