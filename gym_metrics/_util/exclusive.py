"""One process at a time on a resource (a collect's output, a job database): an exclusive
`flock` on a sidecar file, dropped by the kernel when the process dies, so a crash never
leaves a stale lock to clear by hand."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from gym_metrics.errors import GymMetricsError


def hold_exclusive(lock_path: Path, busy: str) -> IO[bytes]:
    """The open, locked `lock_path` (close it to let go); GymMetricsError(`busy`) when another
    process holds it."""
    handle = lock_path.open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise GymMetricsError(busy) from None
    return handle


__all__ = ["hold_exclusive"]
