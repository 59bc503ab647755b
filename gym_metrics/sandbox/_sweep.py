"""An unconfined run's end (isolation `none`, or a host without namespaces): its program and
group killed, then every process left of its user, swept until none is (standard library only:
imported by the launcher, which runs by path)."""

from __future__ import annotations

import os
import signal
import time

SWEEP_S = 2.0
"""How long a run's user is swept at most."""


def become(uid: int) -> None:
    """The job's user, with no groups: it may not signal or read what root owns."""
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def kill_as(uid: int) -> None:
    """kill(-1) as `uid`, in a child of its own: every process of that user."""
    pid = os.fork()
    if pid == 0:
        try:
            become(uid)
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def alive_as(uid: int) -> bool:
    """Whether a live (not zombie) process of `uid` is left: kill(-1) cannot tell (it counts
    the processes it may not signal too). Cheap in the sandbox's pid namespace."""
    want = str(uid).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", "rb") as f:
                head = f.read(1024)
        except OSError:
            continue
        fields = dict(line.split(b":", 1) for line in head.splitlines() if b":" in line)
        if fields.get(b"Uid", b"").split()[:1] == [want] and not fields.get(b"State", b"").strip().startswith(b"Z"):
            return True
    return False


def reap_orphans() -> None:
    """Reap the run's dead descendants (this runner is their subreaper)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep(uid: int | None, pid: int) -> None:
    """Kill the program and its group (before it is reaped: its pid cannot have been reused)."""
    for kill in (os.kill, os.killpg):  # the pid too: it may not have its group yet
        try:
            kill(pid, signal.SIGKILL)
        except OSError:
            pass
    if uid is not None:
        kill_as(uid)


def sweep_user(uid: int | None) -> None:
    """Until no process of the run's user is left (one that left the group, one forked while
    the last kill went round), dead ones reaped, for SWEEP_S at most."""
    deadline = time.monotonic() + SWEEP_S
    while True:
        reap_orphans()
        if uid is None or not alive_as(uid) or time.monotonic() > deadline:
            return
        kill_as(uid)
        time.sleep(0.001)
