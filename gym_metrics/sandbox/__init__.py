"""Running untrusted, model-written code under limits (docs/sandbox.md): `run_local(Program,
Limits)` -> RunResult, with bubblewrap's namespaces where it is installed."""

from gym_metrics.sandbox._local import Limits, Program, RunResult, Stop, bwrap_path, run_local

__all__ = ["Limits", "Program", "RunResult", "Stop", "bwrap_path", "run_local"]
