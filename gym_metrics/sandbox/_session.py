"""A sandboxed Python process kept between tool calls: one per session of a tool environment.

`PythonSession.start(pool)` starts an interpreter in the sandbox (its own user, directory and
limits, as any run); `execute(code)` runs code in it, in one namespace kept from call to call,
and answers what it printed (its subprocesses' output too) and its error; `close()` (from
`close_session`) kills it and removes its directory. A call past its timeout stops the
process: the session's state is gone, and later calls say so.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from gym_metrics.sandbox._local import Launcher, OpenRun
from gym_metrics.sandbox._program import Limits, Program
from gym_metrics.sandbox._pool import Pool

_DRIVER = r'''
import io, json, os, sys, traceback

requests = os.fdopen(os.dup(0), "rb")
replies = os.fdopen(os.dup(1), "wb")
null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)  # a cell (or its subprocess) reading stdin reads nothing, not the next request
sys.stdin = open(os.devnull)
sys.stdout.reconfigure(line_buffering=True)  # in order with what its subprocesses print
cap = int(os.environ["GM_CELL_OUTPUT_BYTES"])
namespace = {"__name__": "__main__"}


def captured(name):
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    return fd


while True:
    header = requests.readline()
    if not header:
        break
    code = requests.read(int(header)).decode("utf-8", "replace")
    out, err = captured(".cell_stdout"), captured(".cell_stderr")
    os.dup2(out, 1)
    os.dup2(err, 2)
    error = None
    try:
        exec(compile(code, "<cell>", "exec"), namespace)
    except SystemExit as exc:
        error = f"SystemExit: {exc.code}"
    except BaseException as exc:
        error = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    texts = []
    for fd in (out, err):
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, cap + 1)
        os.close(fd)
        texts.append(data)
    reply = {"stdout": texts[0][:cap].decode("utf-8", "replace"), "stderr": texts[1][:cap].decode("utf-8", "replace"),
             "error": error, "truncated": any(len(t) > cap for t in texts)}
    data = json.dumps(reply).encode()
    replies.write(b"%d\n" % len(data) + data)
    replies.flush()
'''


@dataclass(frozen=True)
class CellResult:
    """What one `execute` did."""

    stdout: str
    stderr: str
    error: str | None
    """The traceback (or `SystemExit: code`) when the code raised; None when it ran through."""
    truncated: bool = False
    """stdout or stderr was cut at `output_bytes`."""
    stopped: bool = False
    """The process was stopped (a timeout, a limit): the session's state is gone."""


SESSION_LIMITS = Limits(wall_s=3600, cpu_s=600, memory_mb=1024)
"""A session's process over its whole life: its CPU seconds and memory (the wall time is the
session's, kept by its environment's session store)."""


class PythonSession:
    """A Python interpreter in the sandbox, kept between calls (see the module docstring)."""

    def __init__(self, run: OpenRun, output_bytes: int) -> None:
        self._run = run
        self._lock = asyncio.Lock()
        self._gone: str | None = None
        self.output_bytes = output_bytes

    @classmethod
    async def start(cls, sandbox: Pool | Launcher, limits: Limits = SESSION_LIMITS, *, output_bytes: int = 65_536) -> PythonSession:
        """Start the interpreter in one of the pool's launchers (it takes none of the pool's
        places for runs: sessions are bounded by their environment's session store)."""
        program = Program(python=_DRIVER, env={"GM_CELL_OUTPUT_BYTES": str(output_bytes)})
        return cls(await sandbox.open(program, limits), output_bytes)

    @property
    def alive(self) -> bool:
        return self._gone is None

    async def execute(self, code: str, timeout_s: float = 30.0) -> CellResult:
        """Run `code` in the session's namespace, one call at a time."""
        async with self._lock:
            if self._gone is not None:
                return CellResult("", "", f"the session's Python process was {self._gone}; its state is gone", stopped=True)
            data = code.encode()
            try:
                self._run.stdin.write(b"%d\n" % len(data) + data)
                await self._run.stdin.drain()
                header = await asyncio.wait_for(self._run.stdout.readline(), timeout_s)
                reply = await asyncio.wait_for(self._run.stdout.readexactly(int(header)), timeout_s)
            except asyncio.TimeoutError:
                return await self._stop(f"stopped after {timeout_s:g} s (the call's timeout)")
            except (ValueError, asyncio.IncompleteReadError, ConnectionError):  # it died: a limit
                return await self._stop("ended by a CPU or memory limit, or a signal")
            answer = json.loads(reply)
            return CellResult(answer["stdout"], answer["stderr"], answer["error"], answer["truncated"])

    async def _stop(self, why: str) -> CellResult:
        self._gone = why
        await self._run.close()
        return CellResult("", "", f"the session's Python process was {why}; its state is gone", stopped=True)

    async def close(self) -> None:
        """Kill the process and remove its directory (idempotent)."""
        self._gone = self._gone or "closed"
        await self._run.close()
