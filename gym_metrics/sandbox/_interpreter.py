"""A sandboxed Python interpreter kept between tool calls: one per session of a tool environment.

`PythonInterpreter.start(provider)` starts an interpreter in the sandbox (its own user, directory and
limits, as any run); `execute(code)` runs code in it, in one namespace kept from call to call,
and answers what it printed (its subprocesses' output too) and its error; `close()` (from
`close_session`) kills it and removes its directory. A call past its timeout stops the
process: the session's state is gone, and later calls say so.

Each call carries a fresh random nonce, and its reply must carry it back: a reply the cell
wrote itself, or one left from an earlier call, is skipped (bounded), never read as this
call's. A cell runs inside the interpreter, so it can always answer for itself (its own
output); it can never answer for another call. A call whose caller went away (cancelled)
ends the session: its reply would otherwise be left in the pipe.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass
from typing import Any

from gym_metrics.sandbox._program import Limits, Program
from gym_metrics.sandbox._provider import KeptProgram, Provider

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
    nonce, size = header.split()
    code = requests.read(int(size)).decode("utf-8", "replace")
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
    replies.write(b"%s %d\n" % (nonce, len(data)) + data)
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


_MAX_SKIPPED = 16
"""Replies not carrying the call's nonce skipped before the session is ended."""

SESSION_LIMITS = Limits(wall_s=3600, cpu_s=600, memory_mb=1024)
"""A session's process over its whole life: its CPU seconds and memory (the wall time is the
session's, kept by its environment's session store)."""


class PythonInterpreter:
    """A Python interpreter in the sandbox, kept between calls (see the module docstring)."""

    def __init__(self, run: KeptProgram, output_bytes: int) -> None:
        self._run = run
        self._lock = asyncio.Lock()
        self._gone: str | None = None
        self.output_bytes = output_bytes

    @classmethod
    async def start(cls, provider: Provider, limits: Limits = SESSION_LIMITS, *, output_bytes: int = 65_536,
                    client: str = "") -> PythonInterpreter:  # fmt: skip
        """Start the interpreter as a program `provider` keeps running (the local Pool: one of
        its `max_open` places, none of its places for runs), counted against `client`'s share
        (pass the session's Session.client)."""
        program = Program(python=_DRIVER, env={"GM_CELL_OUTPUT_BYTES": str(output_bytes)})
        return cls(await provider.open(program, limits, client=client), output_bytes)

    @property
    def alive(self) -> bool:
        return self._gone is None

    async def execute(self, code: str, timeout_s: float = 30.0) -> CellResult:
        """Run `code` in the session's namespace, one call at a time."""
        async with self._lock:
            if self._gone is not None:
                return CellResult("", "", f"the session's Python process was {self._gone}; its state is gone", stopped=True)
            data, nonce = code.encode(), secrets.token_hex(16).encode()
            try:
                self._run.stdin.write(b"%s %d\n" % (nonce, len(data)) + data)
                await self._run.stdin.drain()
                answer = await asyncio.wait_for(self._reply(nonce), timeout_s)
            except asyncio.TimeoutError:
                return await self._stop(f"stopped after {timeout_s:g} s (the call's timeout)")
            except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return await self._stop("ended by a CPU or memory limit, a signal, or a broken reply")
            except BaseException:  # the caller went away mid-call: its reply would be the next call's
                await asyncio.shield(self._stop("stopped: its call was cancelled"))
                raise
            return CellResult(answer["stdout"], answer["stderr"], answer["error"], answer["truncated"])

    async def _reply(self, nonce: bytes) -> dict[str, Any]:
        """The reply carrying `nonce`, skipping others (a cell's own, or an earlier call's)."""
        most = 8 * self.output_bytes + 4096  # two capped outputs, JSON-escaped, and the rest
        for _ in range(_MAX_SKIPPED + 1):
            said, size = (await self._run.stdout.readline()).split()
            if not 0 <= int(size) <= most:
                raise ValueError(f"a reply of {int(size)} bytes")
            data = await self._run.stdout.readexactly(int(size))
            if said == nonce:
                answer = json.loads(data)
                if not isinstance(answer, dict) or not {"stdout", "stderr", "error", "truncated"} <= answer.keys():
                    raise ValueError("a reply without its fields")
                return answer
        raise ValueError(f"{_MAX_SKIPPED} replies not this call's")

    async def _stop(self, why: str) -> CellResult:
        self._gone = why
        await self._run.close()
        return CellResult("", "", f"the session's Python process was {why}; its state is gone", stopped=True)

    async def close(self) -> None:
        """Kill the process and remove its directory (idempotent)."""
        self._gone = self._gone or "closed"
        await self._run.close()
