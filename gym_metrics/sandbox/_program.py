"""What a sandboxed run is given and what it answers: the same for every provider."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

Stop = Literal["exit", "timeout", "memory", "output_limit", "signal", "cpu"]
"""Why a run stopped: it exited, or was stopped for that reason."""


@dataclass(frozen=True)
class Limits:
    """What one run may use."""

    wall_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 512
    """Memory: the whole run's (every process, its files on its tmpfs) where runs have a
    cgroup, and each process's address space (RLIMIT_AS) always."""
    output_bytes: int = 1 << 20
    """stdout and stderr each, kept; past it the run is stopped (`output_limit`)."""
    file_size_mb: int = 64
    open_files: int = 64
    processes: int = 64
    """At once, threads included (a fork bomb stops here): per run where runs have a cgroup or
    a user of their own (docs/sandbox.md)."""
    nice: int = 10
    """Scheduling priority below the server's: runs busy on every core leave it answering."""
    disk_mb: int = 64
    """What the run may write in all: its directory is a tmpfs of this size (isolation `strict`)."""
    inodes: int = 4096
    """Files and directories the run may make in all (the same tmpfs)."""


@dataclass(frozen=True)
class Program:
    """A program to run: its command, its stdin, files written into its working directory
    first (name -> content), and its environment (nothing else is inherited)."""

    command: Sequence[str] = ()
    stdin: bytes = b""
    files: Mapping[str, str | bytes] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None
    """Python source to run instead of `command`, in the sandbox's own interpreter (this
    one's, with its site-packages), as `python main.py`: no interpreter start, a warm pool's
    run then costs about a fork."""

    def __post_init__(self) -> None:
        if not self.command and self.python is None:
            raise ValueError("a Program needs a command or Python source")

    def files_to_write(self) -> Mapping[str, str | bytes]:
        """Its files, with the Python source as main.py (its traceback then shows its lines)."""
        return {"main.py": self.python, **self.files} if self.python is not None else self.files


@dataclass(frozen=True)
class RunResult:
    """What a run did."""

    exit_code: int | None
    """None when it ended by a signal."""
    stdout: bytes
    stderr: bytes
    truncated: bool
    """True when stdout or stderr was cut at the output limit."""
    stop: Stop
    signal: int | None
    wall_s: float
    cpu_s: float
    max_rss_kb: int
    isolated: bool
    """True when the run was confined (isolation `strict`); False only under isolation `none`."""
    uid: int | None = None
    """The unprivileged user it ran as (a root server's runs), else None: the server's user."""


class SandboxError(RuntimeError):
    """The sandbox itself failed (its launcher is gone): the run's outcome is unknown."""


def write_files(work: Path, files: Mapping[str, str | bytes], uid: int | None) -> None:
    """`files` into `work` (never outside it), owned by the run's user when it has one."""
    root = work.resolve()
    for name, content in files.items():
        target = (work / name).resolve()
        if root not in target.parents:
            raise ValueError(f"file {name!r} would be written outside the working directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content.encode() if isinstance(content, str) else content)
        if uid is not None:
            for path in [target, *(p for p in target.parents if root in p.parents)]:
                os.chown(path, uid, uid)
