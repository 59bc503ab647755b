"""Render group_level_metrics on every core: forked workers write later ranges of groups.

Rendering a million rollout_infos is Python string work that one thread cannot share, so the
output is cut into contiguous ranges of groups; forked children (copy-on-write: they see the
computed columns without a copy) render every range but the first into a file of their own
while this process renders the first, and their files are appended in order with
`copy_file_range` (the kernel copies; nothing passes through Python). The bytes are exactly
those of a serial render: the ranges are cut on the serial renderer's own chunk boundaries.

Used only where fork is safe and pays: Linux, no gRPC loaded (its threads do not survive a
fork), several usable cores and enough groups. A worker that fails costs nothing but time:
its range is rendered here instead. `GYM_METRICS_RENDER_WORKERS=1` turns workers off. Workers
can start as soon as an agent's groups are final (`aggregate_file` starts them before the
agent-level statistics), so rendering overlaps the rest of the aggregation.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

MIN_ROLLOUTS_PER_WORKER = 150_000
"""A worker's share must be worth a fork (about 3 ms) and the extra copy of its bytes."""

Render = Callable[[int, int], Iterator[bytes]]
"""Blobs of groups lo..hi (each blob whole entries joined by the group separator)."""


def render_workers(rollouts: int) -> int:
    """How many processes should render `rollouts` rollout entries (1: this one alone)."""
    setting = os.environ.get("GYM_METRICS_RENDER_WORKERS", "")
    if sys.platform != "linux" or "grpc" in sys.modules or not hasattr(os, "fork"):
        return 1
    cores = len(os.sched_getaffinity(0))
    wanted = int(setting) if setting.isdigit() else cores
    return max(1, min(wanted, cores, rollouts // MIN_ROLLOUTS_PER_WORKER))


@dataclass
class Worker:
    """A forked process rendering groups lo..hi into the file `part`."""

    pid: int
    part: Path
    lo: int
    hi: int


_live: set[int] = set()
"""Workers not yet waited for: no more run at once than there are spare cores."""


def start(tmp_dir: Path, ranges: list[tuple[int, int]], render: Render, sep: bytes) -> list[Worker | None]:
    """A worker per range while cores are spare (None for a range left to the caller)."""
    spare = len(os.sched_getaffinity(0)) - 1 if hasattr(os, "sched_getaffinity") else 0
    out: list[Worker | None] = []
    for lo, hi in ranges:
        out.append(_spawn(tmp_dir, lo, hi, render, sep) if len(_live) < spare else None)
    return out


def finish(f: IO[bytes], worker: Worker, render: Render, sep: bytes) -> None:
    """Append the worker's bytes to `f`, or render its range here if it failed."""
    ok = _succeeded(worker.pid)
    f.flush()
    if ok and worker.part.exists():
        _append(f, worker.part)
    else:
        for blob in render(worker.lo, worker.hi):
            f.write(sep + blob)
    worker.part.unlink(missing_ok=True)


def discard(workers: list[Worker | None]) -> None:
    """Stop workers whose bytes will not be used and remove their files; each entry is then
    None (a pid is never waited for twice: it may name another process by then)."""
    for i, w in enumerate(workers):
        if w is not None:
            workers[i] = None
            _reap(w.pid)
            w.part.unlink(missing_ok=True)


def _spawn(tmp_dir: Path, lo: int, hi: int, render: Render, sep: bytes) -> Worker:
    part = tmp_dir / f".gym-metrics-render-{os.getpid()}-{id(render)}-{lo}.part"
    with warnings.catch_warnings():  # idle pyarrow / writer threads: the child uses neither
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: render, write, leave without running the parent's exit hooks
        code = 1
        try:
            with part.open("wb") as out:
                for blob in render(lo, hi):
                    out.write(sep + blob)
            code = 0
        finally:
            os._exit(code)
    _live.add(pid)
    return Worker(pid, part, lo, hi)


def _succeeded(pid: int) -> bool:
    _live.discard(pid)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _reap(pid: int) -> None:
    """Make sure a worker is gone (its bytes are not wanted)."""
    _live.discard(pid)
    try:
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    except ChildProcessError:
        pass  # already waited for
def _append(f: IO[bytes], part: Path) -> None:
    """Append the file `part` to `f` (flushed) in the kernel."""
    out = f.fileno()
    with part.open("rb") as src:
        left = os.fstat(src.fileno()).st_size
        while left > 0:
            try:
                done = os.copy_file_range(src.fileno(), out, left)
            except OSError:  # a filesystem pair without it: copy through a buffer
                done = os.write(out, src.read(min(left, 1 << 24)))
            if done <= 0:
                raise OSError(f"could not append {part}")
            left -= done
