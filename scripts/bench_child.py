"""A server in a child process for the benchmarks: its address read from the "listening on"
line it writes to stderr; stopped (terminate, then kill) on exit. Standard library only, so
scripts running under another venv (nemo-gym's) can use it too."""

from __future__ import annotations

import re
import subprocess
import threading
import time


class Child:
    """A server in a child process; its address is read from the "listening on" line of stderr."""

    def __init__(self, cmd: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.monotonic() + 60
        assert self.proc.stderr is not None
        seen = []
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            seen.append(line)
            found = re.search(r"listening on (\S+:\d+)", line)
            if found:
                self.address = found.group(1)
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # never let the pipe fill
                return
            if not line and self.proc.poll() is not None:
                break
        self.stop()
        raise RuntimeError("server did not start:\n" + "".join(seen[-20:]))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
