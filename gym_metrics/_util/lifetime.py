"""A child process that dies with the run that started it: a shard of `collect --processes`,
or the environment `collect --benchmark` serves for its run. The parent names itself in the
child's environment; the child asks the kernel to kill it when that parent dies (Linux's
PR_SET_PDEATHSIG), so a killed run (SIGKILL: no handler runs) leaves nothing behind holding
its port or writing on."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PARENT_ENV = "GYM_METRICS_SHARD_PARENT"
"""The pid of the run a child process belongs to (it dies with it)."""


def with_parent(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a child that should die with this process."""
    return {**(os.environ if env is None else env), PARENT_ENV: str(os.getpid())}


def die_with_parent() -> None:
    """Called first in the child: the kernel kills it when its parent dies; a parent gone
    already ends it now. The variable is consumed: the child's own children (a server's
    workers) are the child's to bind. (Set here, not between fork and exec: the parent holds
    gRPC's threads, and a fork hook there can abort the child.)"""
    parent = os.environ.pop(PARENT_ENV, None)
    if parent is None or not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != int(parent):
        os._exit(1)
