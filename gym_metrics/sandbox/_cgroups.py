"""A cgroup per run, where the host lets this process make them: one bound on the run's memory
(its tmpfs, its page cache and every process it forks together, swap refused) and one on its
processes, and where it can, one CPU share per run (`_FAIR`). RLIMIT_AS and RLIMIT_NPROC hold per process and per user; this holds per run.

This module finds the hierarchies and makes a pool's base directories (with `park`, where
runners go when done); each runner makes, joins, bounds and removes its run's cgroup itself,
through the base directories' descriptors (_confine.RunGroup), ahead of its job.

cgroup v1 (separate `memory` and `pids` hierarchies) and v2 (one hierarchy, where this
process's cgroup already hands both controllers down to its children) are both read from
/proc/self/cgroup and /proc/self/mountinfo. Elsewhere (a container whose /sys/fs/cgroup is
read-only) there is none, and docs/sandbox.md says which bounds hold then.
"""

from __future__ import annotations

import errno
import os
import time
import uuid
from pathlib import Path

_CONTROLLERS = ("memory", "pids")
_FAIR = "cpu"
"""Joined where the host lets us, bounding nothing: a cgroup per run takes CPU as one
scheduling entity, each run the same share however many processes it forks (a run's own
session and each of its `setsid` children were an autogroup of the server's weight each: 60
busy children starved the other runs into timeouts, and the server's health check)."""


class Cgroups:
    """Where a pool's runs get their cgroups: a directory of its own in each hierarchy."""

    def __init__(self, bases: list[Path], v2: bool) -> None:
        self.bases, self.v2 = bases, v2

    @property
    def fair(self) -> bool:
        """Whether each run gets its own CPU share (`_FAIR`) besides its bounds."""
        return len(self.bases) > 2 or (self.v2 and _FAIR in _read(self.bases[0] / "cgroup.subtree_control").split())

    def launcher_args(self) -> tuple[list[str], list[int]]:
        """A launcher's `--cgroups` arguments and the descriptors to pass it (the caller closes
        them once the launcher started)."""
        fds = [os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC) for base in self.bases]
        return ["--cgroups", ("v2:" if self.v2 else "v1:") + ",".join(map(str, fds))], fds

    @classmethod
    def find(cls) -> Cgroups | None:
        """This process's place for run cgroups, made now; None where it cannot make them."""
        try:
            found = _locate()
        except OSError:
            return None
        if found is None:
            return None
        parents, v2 = found
        for parent in parents:
            _remove_stale(parent)
        bases = [parent / f"gym-metrics-{os.getpid()}-{uuid.uuid4().hex[:8]}" for parent in parents]
        try:
            for base in bases:
                base.mkdir()
            if v2:
                (bases[0] / "cgroup.subtree_control").write_text("+memory +pids")
                try:
                    (bases[0] / "cgroup.subtree_control").write_text(f"+{_FAIR}")
                except OSError:
                    pass  # where cpu is not handed down: runs keep the bounds, not the fair share
            for base in bases:
                (base / "park").mkdir()
        except OSError:
            cls(bases, v2).remove()
            return None
        return cls(bases, v2)

    def remove(self) -> None:
        """Its runs' cgroups (their runners are gone or going), `park`, then itself."""
        for base in self.bases:
            for child in [*base.glob("run-*"), base / "park"]:
                _rmdir(child, wait_s=1.0)
            _rmdir(base)


def _locate() -> tuple[list[Path], bool] | None:
    """This process's cgroup directories with the memory and pids controllers: [memory, pids]
    under v1, [the one] under v2 (where both are enabled for its children or can be)."""
    ours: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for c in controllers.split(",") if controllers else [""]:
            ours[c] = path
    mounts: dict[str, Path] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        kind, _, options = (right.split() + ["", "", ""])[:3]
        point = Path(left.split()[4])
        if kind == "cgroup":
            for c in (*_CONTROLLERS, _FAIR):
                if c in options.split(","):
                    mounts[c] = point
        elif kind == "cgroup2":
            mounts.setdefault("", point)
    if all(c in mounts and c in ours for c in _CONTROLLERS):
        dirs = [mounts[c] / ours[c].lstrip("/") for c in _CONTROLLERS]
        if not all(os.access(d, os.W_OK) for d in dirs):
            return None
        if _FAIR in mounts and _FAIR in ours:  # after the two bounds, which keep their places
            fair = mounts[_FAIR] / ours[_FAIR].lstrip("/")
            if fair not in dirs and os.access(fair, os.W_OK):
                dirs.append(fair)
        return dirs, False
    if "" in mounts and "" in ours:
        here = mounts[""] / ours[""].lstrip("/")
        available = _read(here / "cgroup.subtree_control").split()  # handed down to children (delegated)
        if all(c in available for c in _CONTROLLERS) and os.access(here, os.W_OK):
            return [here], True
    return None


def _remove_stale(parent: Path) -> None:
    """Directories left by a server that was killed (its pid gone), when empty of processes."""
    for base in parent.glob("gym-metrics-*-*"):
        try:
            pid = int(base.name.split("-")[2])
            os.kill(pid, 0)
            continue  # its server lives
        except (ValueError, IndexError):
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        Cgroups([base], False).remove()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _rmdir(path: Path, wait_s: float = 0.0) -> None:
    """Remove a cgroup directory; one still holding a process that is exiting is retried for
    `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return
            time.sleep(0.005)
