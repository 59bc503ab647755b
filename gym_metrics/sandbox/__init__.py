"""Running untrusted, model-written code under limits (docs/sandbox.md): `run_local(Program,
Limits)` -> RunResult, a provider's `run` (the local `Pool` runs in launchers started ahead),
and `PythonInterpreter`, an interpreter kept between a session's tool calls. Providers are
chosen by name (`make_provider`, `serve --sandbox-provider`). Fails closed: isolation `strict`
(bubblewrap, a user, namespaces and a tmpfs of each run's own, a seccomp filter, a cgroup where
the host allows) or nothing runs, unless isolation `none` is asked for by name."""

from gym_metrics._util.deprecated import old_names
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
from gym_metrics.sandbox._provider import KeptProgram, Provider
from gym_metrics.sandbox._providers import (
    OPTIONS_ENV,
    PROVIDER_ENV,
    PROVIDERS,
    check_options,
    make_provider,
    provider_names,
    register_provider,
)
from gym_metrics.sandbox._interpreter import SESSION_LIMITS, CellResult, PythonInterpreter

__getattr__ = old_names(__name__)  # PythonSession: PythonInterpreter

__all__ = [
    "CellResult", "DockerProvider", "ISOLATIONS", "ISOLATION_ENV", "Isolation", "KeptProgram", "Launcher",
    "LauncherGoneError", "Limits", "OPTIONS_ENV", "OpenRun", "PROVIDERS", "PROVIDER_ENV", "Pool", "Program", "Provider",
    "PythonInterpreter", "RunResult", "SESSION_LIMITS", "SandboxBusyError", "SandboxError", "SandboxUnavailableError", "Stop", "bwrap_path",
    "check_isolation", "check_options", "default_isolation", "make_provider", "provider_names", "register_provider", "run_local",
]  # fmt: skip
