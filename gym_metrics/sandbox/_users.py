"""Unprivileged users for sandboxed runs, one per run at a time, when the server runs as root.

A user of its own gives a run what root is exempt from or allowed: the processes limit
(RLIMIT_NPROC counts that user's processes, so a fork bomb stops at the limit), no reading of
files only root may read, no signalling the server or another run, and a sweep that kills all
the user's processes afterwards. Each uid is leased with a lock on its own byte of one file
(fcntl record locks, dropped by the kernel when the process dies), so that `serve --workers N`
processes never hand out the same uid at once, and no lock files pile up.
"""

from __future__ import annotations

import fcntl
import os
import random
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

UID_BASE = int(os.environ.get("GYM_METRICS_SANDBOX_UID_BASE", "2000000000"))
"""Far above any real user's uid; the runs' uids are UID_BASE .. UID_BASE + UID_COUNT - 1
(set GYM_METRICS_SANDBOX_UID_BASE to give a server a range of its own)."""
UID_COUNT = 65_536

_held: set[int] = set()  # this process's leases: record locks are per process, so these are skipped here
_file: list[int] = []  # the lock file, open for this process's life (closing any descriptor of it drops every lock)


@dataclass
class UidLease:
    uid: int
    _fd: int

    def release(self) -> None:
        if self._fd >= 0:
            fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, self.uid - UID_BASE)
            self._fd = -1
            _held.discard(self.uid)


def _lock_file() -> int:
    if not _file:
        where = Path(tempfile.gettempdir()) / "gym-metrics-sandbox-uids"
        where.mkdir(mode=0o700, exist_ok=True)
        _file.append(os.open(where / "leases", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
    return _file[0]


def lease_uid() -> UidLease | None:
    """A uid no other run holds, or None when this process is not root (it cannot switch)."""
    if os.geteuid() != 0:
        return None
    fd = _lock_file()
    start = random.randrange(UID_COUNT)
    for i in range(UID_COUNT):
        offset = (start + i) % UID_COUNT
        if UID_BASE + offset in _held:
            continue
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
        except OSError:  # another process holds it
            continue
        _held.add(UID_BASE + offset)
        return UidLease(UID_BASE + offset, fd)
    raise RuntimeError(f"all {UID_COUNT} sandbox uids are in use")


def others_can_run(path: str) -> bool:
    """Whether a user with no relation to the file's owner or group can reach and run `path`
    (every directory above it searchable by others, the file executable by others)."""
    real = os.path.realpath(path)
    try:
        if not os.stat(real).st_mode & stat.S_IXOTH:
            return False
        parent = os.path.dirname(real)
        while True:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
            if parent == "/":
                return True
            parent = os.path.dirname(parent)
    except OSError:
        return False
