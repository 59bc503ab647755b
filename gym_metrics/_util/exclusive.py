"""One process at a time on a resource (a collect's output, a job database): an exclusive
`flock` on a sidecar file, dropped by the kernel when the process dies, so a crash never
leaves a stale lock to clear by hand; a holder that lets go removes the file."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import IO

from gym_metrics.errors import GymMetricsError

_TAKES = 100
"""Times a lock file removed or replaced while this process waited for it is opened again."""


class Exclusive:
    """A held lock: `close()` removes its file while still holding it, then lets go (a process
    that opened the file meanwhile finds it gone once it gets the lock, and opens it again)."""

    def __init__(self, handle: IO[bytes], path: Path) -> None:
        self._handle: IO[bytes] | None = handle
        self.path = path

    def close(self) -> None:
        if self._handle is not None:
            handle, self._handle = self._handle, None
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            handle.close()


def hold_exclusive(lock_path: Path, busy: str) -> Exclusive:
    """`lock_path` locked by this process (close the answer to let go); GymMetricsError(`busy`)
    when another process holds it."""
    for _ in range(_TAKES):
        handle = lock_path.open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise GymMetricsError(busy) from None
        if _is_still_there(handle, lock_path):
            return Exclusive(handle, lock_path)
        handle.close()  # its holder removed it as it let go: the lock is the file now at the path
    raise GymMetricsError(busy)


def _is_still_there(handle: IO[bytes], path: Path) -> bool:
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(handle.fileno())
    return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


__all__ = ["Exclusive", "hold_exclusive"]
