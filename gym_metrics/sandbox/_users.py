"""Unprivileged users for sandboxed runs, one per run at a time, when the server runs as root.

A user of its own gives a run what root is exempt from or allowed: the processes limit
(RLIMIT_NPROC counts that user's processes, so a fork bomb stops at the limit), no reading of
files only root may read, no signalling the server or another run, and a sweep that kills all
the user's processes afterwards. Each uid is leased with an flock on a file of its own, so that
`serve --workers N` processes never hand out the same uid at once.
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

_held: set[int] = set()  # this process's leases: skipped without a system call


@dataclass
class UidLease:
    uid: int
    _fd: int

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # drops the flock
            self._fd = -1
            _held.discard(self.uid)


def _lock_dir() -> Path:
    path = Path(tempfile.gettempdir()) / "gym-metrics-sandbox-uids"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def lease_uid() -> UidLease | None:
    """A uid no other run holds, or None when this process is not root (it cannot switch)."""
    if os.geteuid() != 0:
        return None
    where = _lock_dir()
    start = random.randrange(UID_COUNT)
    for i in range(UID_COUNT):
        offset = (start + i) % UID_COUNT
        uid = UID_BASE + offset
        if uid in _held:
            continue
        fd = os.open(where / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        _held.add(uid)
        return UidLease(uid, fd)
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
