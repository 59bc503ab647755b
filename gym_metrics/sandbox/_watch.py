"""The caller's side of a run, for every provider: feed stdin, keep the output up to its cap,
kill the run at the wall deadline or past the cap (or when cancelled), and name why it stopped."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from gym_metrics.sandbox._program import Limits, Stop

@dataclass(frozen=True)
class Watched:
    """A run's output, and whether the caller stopped it (`timeout`, `output_limit`)."""

    stdout: bytes
    stderr: bytes
    truncated: bool
    stopped: Literal["timeout", "output_limit"] | None


async def watch(stdout: asyncio.StreamReader, stderr: asyncio.StreamReader, feed: Awaitable[None],
                ended: asyncio.Future[Any], kill: Callable[[], object], limits: Limits) -> Watched:  # fmt: skip
    """Feed stdin and keep the output (up to the limit, the rest drained) until `ended`, the
    wall deadline or the output cap; past either, or when cancelled, `kill()` and wait for
    `ended` a little (a provider's kill is milliseconds)."""
    over = asyncio.Event()

    async def read(stream: asyncio.StreamReader, out: bytearray) -> None:
        while chunk := await stream.read(65536):
            room = limits.output_bytes - len(out)
            if room > 0:
                out += chunk[:room]
            if len(chunk) > room:
                over.set()

    out, err = bytearray(), bytearray()
    io = asyncio.gather(read(stdout, out), read(stderr, err), feed)
    limit_hit = asyncio.ensure_future(over.wait())
    done: set[asyncio.Future[Any]] = set()
    try:
        done, _ = await asyncio.wait({ended, limit_hit}, timeout=limits.wall_s, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when cancelled (the client went away): the run is killed
        limit_hit.cancel()
        if ended not in done:
            kill()
            await asyncio.wait({ended}, timeout=REPORT_GRACE_S)
        # its output's last bytes (a writer that escaped the kill could hold the pipe: not for long)
        await asyncio.wait({io}, timeout=REPORT_GRACE_S)
        io.cancel()
        await asyncio.gather(io, return_exceptions=True)
    stopped: Literal["timeout", "output_limit"] | None = None
    if ended not in done:
        stopped = "output_limit" if limit_hit in done else "timeout"
    elif over.is_set():  # past the cap as it ended (the kill came too late): its output was cut all the same
        stopped = "output_limit"
    return Watched(bytes(out), bytes(err), over.is_set(), stopped)


def stop_of(watched: Watched, code: int, cpu_s: float, limits: Limits, *, oom: bool = False) -> tuple[Stop, int | None]:
    """Why the run stopped, and the signal that ended it (exit code -N); `oom`: the kernel
    killed one of its processes for the run's memory bound (its cgroup)."""
    sig = -code if code < 0 else None
    if watched.stopped is not None:
        return watched.stopped, sig
    if oom and code != 0:
        return "memory", sig
    stop: Stop = "exit"
    if sig is not None:  # SIGXCPU at the soft CPU limit, SIGKILL at the hard one
        stop = "cpu" if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= 0.9 * limits.cpu_s) else "signal"
    tail = watched.stderr[-4096:]
    if stop != "cpu" and code != 0 and (b"MemoryError" in tail or b"Cannot allocate memory" in tail):
        stop = "memory"
    return stop, sig


REPORT_GRACE_S = 5.0
"""How long the runner may take to kill and report once told to (a backstop: it is milliseconds)."""
