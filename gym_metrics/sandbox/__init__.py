"""Running untrusted, model-written code under limits (docs/sandbox.md): `run_local(Program,
Limits)` -> RunResult, or `Pool.run` with launchers started ahead; bubblewrap's namespaces where
it is installed, a user of the run's own when the server runs as root."""

from gym_metrics.sandbox._local import Limits, Program, RunResult, Stop, bwrap_path, run_local
from gym_metrics.sandbox._pool import Pool, SandboxBusyError

__all__ = ["Limits", "Pool", "Program", "RunResult", "SandboxBusyError", "Stop", "bwrap_path", "run_local"]
