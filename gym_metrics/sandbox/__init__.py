"""Running untrusted, model-written code under limits (docs/sandbox.md): `run_local(Program,
Limits)` -> RunResult, `Pool.run` in launchers started ahead, and `PythonSession`, an
interpreter kept between a session's tool calls. Bubblewrap's namespaces where it is installed,
a user of the run's own when the server runs as root."""

from gym_metrics.sandbox._bwrap import bwrap_path
from gym_metrics.sandbox._local import Launcher, OpenRun, run_local
from gym_metrics.sandbox._program import Limits, Program, RunResult, SandboxError, Stop
from gym_metrics.sandbox._docker import DockerProvider
from gym_metrics.sandbox._pool import Pool, SandboxBusyError
from gym_metrics.sandbox._provider import Provider
from gym_metrics.sandbox._session import CellResult, PythonSession

__all__ = [
    "CellResult", "DockerProvider", "Launcher", "Limits", "OpenRun", "Pool", "Program", "Provider", "PythonSession",
    "RunResult", "SandboxBusyError",
    "SandboxError", "Stop", "bwrap_path", "run_local",
]  # fmt: skip
