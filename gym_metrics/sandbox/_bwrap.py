"""bubblewrap's command line for a launcher: a read-only view of the filesystem, an empty /tmp
and home with what the run needs re-bound read-only, and fresh namespaces (docs/sandbox.md)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _hidden() -> list[str]:
    """What the run must not see: /tmp (a private one instead) and the server user's home."""
    home = os.path.realpath(os.path.expanduser("~"))
    return ["/tmp"] + ([home] if home not in ("/", "/tmp") and os.path.isdir(home) else [])


def _rebound(hidden: list[str], launcher_dir: str) -> list[str]:
    """bwrap arguments showing again, read-only, what the run needs from a hidden place: the
    interpreter and the launcher (a venv or a checkout under /tmp or the home)."""
    needed = {sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)), launcher_dir}
    args: list[str] = []
    made: set[str] = set()
    for path in sorted({os.path.realpath(p) for p in needed}):
        top = next((h for h in hidden if path.startswith(h.rstrip("/") + "/")), None)
        if top is None:
            continue
        parent = os.path.dirname(path)
        ancestors = []
        while parent != top and parent not in made:  # searchable by the run's user (bwrap makes them 0700)
            ancestors.append(parent)
            parent = os.path.dirname(parent)
        for a in reversed(ancestors):
            args += ["--perms", "0755", "--dir", a]
            made.add(a)
        args += ["--ro-bind", path, path]
    return args


def bwrap_prefix(bwrap: str, root: Path, launcher_dir: str) -> list[str]:
    """bwrap's arguments up to the launcher's command: `root` is the runs' writable place."""
    hidden = _hidden()
    return [
        bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
        # empty and root's: a run's user can write nowhere but its own directory in `root`
        *(arg for h in hidden for arg in ("--perms", "0755", "--tmpfs", h)),
        *_rebound(hidden, launcher_dir),
        "--bind", str(root), str(root), "--chdir", str(root),
        # no user namespace: the launcher inside needs root's power to switch to the run's user
        "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
        "--die-with-parent", "--new-session", "--",
    ]  # fmt: skip
