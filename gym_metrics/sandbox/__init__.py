"""Running untrusted, model-written code under limits (docs/sandbox.md): `run_local(Program,
Limits)` -> RunResult, `Pool.run` in launchers started ahead, and `PythonSession`, an
interpreter kept between a session's tool calls. Fails closed: isolation `strict` (bubblewrap,
a user, namespaces and a tmpfs of each run's own, a seccomp filter, a cgroup where the host
allows) or nothing runs, unless isolation `none` is asked for by name."""

from gym_metrics.sandbox._bwrap import bwrap_path
from gym_metrics.sandbox._isolation import (
    ISOLATION_ENV,
    ISOLATIONS,
    Isolation,
    SandboxUnavailableError,
    check_isolation,
    default_isolation,
)
from gym_metrics.sandbox._local import Launcher, LauncherGoneError, OpenRun, run_local
from gym_metrics.sandbox._program import Limits, Program, RunResult, SandboxError, Stop
from gym_metrics.sandbox._docker import DockerProvider
from gym_metrics.sandbox._pool import Pool, SandboxBusyError
from gym_metrics.sandbox._provider import Provider
from gym_metrics.sandbox._session import CellResult, PythonSession

__all__ = [
    "CellResult", "DockerProvider", "ISOLATIONS", "ISOLATION_ENV", "Isolation", "Launcher", "LauncherGoneError",
    "Limits", "OpenRun", "Pool", "Program", "Provider", "PythonSession", "RunResult", "SandboxBusyError",
    "SandboxError", "SandboxUnavailableError", "Stop", "bwrap_path", "check_isolation", "default_isolation", "run_local",
]  # fmt: skip
