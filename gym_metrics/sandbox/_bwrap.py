"""bubblewrap's command line for a launcher: only the system's programs and libraries (read-only),
the interpreter and the launcher (read-only), an empty /tmp, a fresh /dev and /proc, the runs'
own directory, and fresh namespaces (docs/sandbox.md). What is not listed is not there: homes,
/var, /run and their Unix sockets, the project's checkout, the host's /tmp."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
"""Shown read-only (merged-/usr systems' symlinks kept as symlinks)."""


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _covered(path: str, shown: list[str]) -> bool:
    return any(path == s or path.startswith(s.rstrip("/") + "/") for s in shown)


def _parents(path: str, made: set[str]) -> list[str]:
    """bwrap arguments making `path`'s missing ancestors searchable by every user (bwrap's own
    would be 0700, out of the run's user's reach)."""
    missing = []
    parent = os.path.dirname(path)
    while parent not in ("/", "") and parent not in made and not _covered(parent, list(SYSTEM)):
        missing.append(parent)
        parent = os.path.dirname(parent)
    args: list[str] = []
    for p in reversed(missing):
        args += ["--perms", "0755", "--dir", p]
        made.add(p)
    return args


def bwrap_prefix(bwrap: str, root: Path, launcher_dir: str) -> list[str]:
    """bwrap's arguments up to the launcher's command: `root` is the runs' writable place."""
    args = [bwrap]
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--dev", "/dev", "--proc", "/proc", "--perms", "0755", "--tmpfs", "/tmp"]
    made = {"/tmp"}
    needed = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), launcher_dir}
    shown: list[str] = []
    for path in sorted({os.path.realpath(p) for p in needed}):
        if _covered(path, [*SYSTEM, *shown]):
            continue
        args += [*_parents(path, made), "--ro-bind", path, path]
        shown.append(path)
    where = str(root.resolve())
    args += [*_parents(where, made), "--bind", where, where, "--chdir", where]
    # no user namespace: the launcher inside keeps root's power, to switch to each run's user
    # and to give each run namespaces and a tmpfs of its own (_confine.py)
    return [
        *args, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--",
    ]  # fmt: skip
