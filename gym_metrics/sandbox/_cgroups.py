"""A cgroup per run, where the host lets this process make them: one bound on the run's memory
(its tmpfs, its page cache and every process it forks together, swap refused) and one on its
processes. RLIMIT_AS and RLIMIT_NPROC hold per process and per user; this holds per run.

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
from dataclasses import dataclass
from pathlib import Path

_CONTROLLERS = ("memory", "pids")


@dataclass
class RunCgroup:
    """One run's cgroup(s): one per hierarchy (two under v1, one under v2)."""

    dirs: list[Path]
    v2: bool

    def procs_fds(self) -> list[int]:
        """Each hierarchy's `cgroup.procs`, open for writing: the run's init writes itself in."""
        return [os.open(d / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC) for d in self.dirs]

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the run for the memory bound."""
        memory = self.dirs[0]
        text = _read(memory / ("memory.events" if self.v2 else "memory.oom_control"))
        return any(line.split()[:1] == ["oom_kill"] and line.split()[1] != "0" for line in text.splitlines())

    def remove(self) -> None:
        """Remove it once its processes are gone (they are, or going: the run's init is reaped)."""
        for d in self.dirs:
            for _ in range(200):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY:
                        break
                    time.sleep(0.005)


class Cgroups:
    """Where this process makes its runs' cgroups: a directory of its own in each hierarchy."""

    def __init__(self, bases: list[Path], v2: bool) -> None:
        self.bases, self.v2 = bases, v2

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
        except OSError:
            for base in bases:
                _rmdir(base)
            return None
        return cls(bases, v2)

    def new_run(self, memory_mb: int, processes: int) -> RunCgroup:
        """A cgroup for one run: `memory_mb` in all, no swap, `processes` at once (and its init)."""
        name = f"run-{uuid.uuid4().hex[:12]}"
        dirs = [base / name for base in self.bases]
        made: list[Path] = []
        try:
            for d in dirs:
                d.mkdir()
                made.append(d)
            memory, pids = (dirs[0], dirs[0]) if self.v2 else (dirs[0], dirs[1])
            limit = str(memory_mb << 20)
            if self.v2:
                (memory / "memory.max").write_text(limit)
                _write_if_there(memory / "memory.swap.max", "0")
                _write_if_there(memory / "memory.oom.group", "1")
            else:
                (memory / "memory.limit_in_bytes").write_text(limit)
                _write_if_there(memory / "memory.memsw.limit_in_bytes", limit)
            (pids / "pids.max").write_text(str(processes + 1))
        except OSError:
            for d in made:
                _rmdir(d)
            raise
        return RunCgroup(dirs, self.v2)

    def remove(self) -> None:
        for base in self.bases:
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
            for c in _CONTROLLERS:
                if c in options.split(","):
                    mounts[c] = point
        elif kind == "cgroup2":
            mounts.setdefault("", point)
    if all(c in mounts and c in ours for c in _CONTROLLERS):
        dirs = [mounts[c] / ours[c].lstrip("/") for c in _CONTROLLERS]
        return (dirs, False) if all(os.access(d, os.W_OK) for d in dirs) else None
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
        for run in base.glob("run-*"):
            _rmdir(run)
        _rmdir(base)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write_if_there(path: Path, value: str) -> None:
    if path.exists():
        path.write_text(value)


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass
