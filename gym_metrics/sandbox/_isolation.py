"""Which isolation the sandbox gives, and whether this host can give it: the sandbox fails
closed. `strict` (the default) needs bubblewrap, root (a user of each run's own) and this
kernel's namespaces and seccomp; where any is missing nothing runs, and the error says what is
missing and how to get it. `none` runs model code with the server's reach: only when asked for
by name (`--sandbox-isolation none`, GYM_METRICS_SANDBOX_ISOLATION=none), with a warning, and
every result says `isolated: False`."""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal, get_args

from gym_metrics.errors import GymMetricsError
from gym_metrics.sandbox._bwrap import bwrap_path, bwrap_prefix

Isolation = Literal["strict", "none"]
ISOLATIONS: tuple[Isolation, ...] = get_args(Isolation)
ISOLATION_ENV = "GYM_METRICS_SANDBOX_ISOLATION"
"""Set by `serve --sandbox-isolation` for the server and its workers; read by every Pool."""

LAUNCHER = Path(__file__).with_name("_launch.py")
log = logging.getLogger("gym_metrics.sandbox")
_HOW = "docs/sandbox.md#deploy; or --sandbox-isolation none to run model code unisolated"


class SandboxUnavailableError(GymMetricsError):
    """The isolation asked for is not there: nothing runs (the server refuses to start)."""


def default_isolation() -> Isolation:
    value = os.environ.get(ISOLATION_ENV, "strict")
    for isolation in ISOLATIONS:
        if value == isolation:
            return isolation
    raise SandboxUnavailableError(f"{ISOLATION_ENV}={value!r}: expected one of {', '.join(ISOLATIONS)}")


def check_isolation(isolation: Isolation) -> None:
    """Raise SandboxUnavailableError (one line: what is missing, how to get it) unless this host
    gives `isolation`; `none` is allowed with a warning, once per process."""
    if isolation == "none":
        _warn_unisolated()
        return
    if isolation not in ISOLATIONS:
        raise SandboxUnavailableError(f"unknown sandbox isolation {isolation!r}: expected one of {', '.join(ISOLATIONS)}")
    _check_strict()


@functools.lru_cache(maxsize=1)
def _warn_unisolated() -> None:
    log.warning("gym-metrics: sandbox isolation is off (none): model code runs with this server's user, files and "
                "network; every result says isolated: false (docs/sandbox.md#threat-model)")  # fmt: skip


@functools.lru_cache(maxsize=1)
def warn_root_runs() -> None:
    """`users=False` on a root server: the runs keep uid 0 (no capability, but root's own files,
    /etc/shadow among them, are theirs to read). Allowed, to measure what users cost; said."""
    log.warning("gym-metrics: sandbox users are off (users=false) on a root server: model code runs as uid 0 and can "
                "read files only root may read; every result says isolated: false (docs/sandbox.md#threat-model)")  # fmt: skip


@functools.lru_cache(maxsize=1)
def _check_strict() -> None:
    """Once per process: the tools, then a real probe (namespaces, a capped tmpfs, the filter)."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxUnavailableError(
            f"the sandbox cannot isolate runs: bubblewrap (bwrap) is not installed (apt-get install bubblewrap; {_HOW})"
        )
    if os.geteuid() != 0:
        raise SandboxUnavailableError(
            f"the sandbox cannot isolate runs: it needs root to give each run a user of its own (uid {os.geteuid()}; {_HOW})"
        )
    with tempfile.TemporaryDirectory(prefix="gm-sandbox-probe-") as root:
        command = [*bwrap_prefix(bwrap, Path(root), str(LAUNCHER.parent)), sys.executable, "-I", str(LAUNCHER), "--probe", root]
        try:
            done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailableError(f"the sandbox cannot isolate runs: bubblewrap failed to start ({exc}; {_HOW})") from None
    if done.returncode != 0:
        said = " ".join((done.stderr.decode(errors="replace").strip() or f"exit {done.returncode}").split())[-300:]
        raise SandboxUnavailableError(f"the sandbox cannot isolate runs here: {said} ({_HOW})")
