"""Per-call limits of the server: explicit, documented, checked before the work is done.

Each limit has a CLI flag of the same name (`gym-metrics serve --max-rollouts-per-call N`);
a call past one is refused with RESOURCE_EXHAUSTED naming the limit and its flag.
"""

from __future__ import annotations

from dataclasses import dataclass

from gym_metrics.errors import OverloadedError


@dataclass(frozen=True)
class CallLimits:
    """Bounds on one AggregateMetrics call (the call that grows with the data)."""

    max_rollouts_per_call: int = 20_000_000
    """Rollouts one AggregateMetrics call may send (about 25 bytes of server memory each
    without rows)."""
    max_tasks_per_call: int = 5_000_000
    """Distinct tasks (and expected tasks) one AggregateMetrics call may name."""
    max_concurrent_aggregations: int = 4
    """AggregateMetrics calls running at once; one more is refused at its header."""
    max_call_mb: float = 4096.0
    """Request bytes one AggregateMetrics call may send, in MiB (rows as JSON count here)."""
    max_rows_per_batch: int = 262_144
    """Rollouts one batch message of an AggregateMetrics call may carry (collect sends 50,000):
    a batch is decoded into columns on the event loop, so this bounds how long one message
    holds it (a 1M-row batch: about 100 ms on a slow core)."""

    def __post_init__(self) -> None:
        for name in ("max_rollouts_per_call", "max_tasks_per_call", "max_concurrent_aggregations", "max_call_mb", "max_rows_per_batch"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @property
    def max_call_bytes(self) -> int:
        return int(self.max_call_mb * (1 << 20))


def exceeded(limit: str, value: float, what: str, retry_after_s: float | None = None) -> OverloadedError:
    """The error for a call past `limit` (a CallLimits field), naming it and its flag;
    `retry_after_s` when the same call may succeed later (the server is busy)."""
    flag = "--" + limit.replace("_", "-")
    shown = f"{value:g}" if isinstance(value, float) else f"{value:,}"
    return OverloadedError(f"{what}: past the server's limit {limit} = {shown} (gym-metrics serve {flag})", retry_after_s)




MAX_SESSIONS = 10_000
"""Live sessions one server holds at most (`serve --max-sessions`)."""
IDLE_TTL_S = 300.0
"""Seconds a session may go unused before it is closed (`serve --session-ttl`)."""
TOOL_TIMEOUT_S = 60.0
"""Seconds one tool call may run (`serve --tool-timeout`); past it the model reads a timeout."""


def ensure_open_files(needed: int, what: str) -> None:
    """Raise this process's soft limit on open files to cover `needed` (up to the hard limit);
    InvalidInputError naming `what` when even the hard limit is short, before any work starts
    (else the calls past it fail one by one with "Too many open files")."""
    try:
        import resource
    except ImportError:  # not on this platform
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        from gym_metrics.errors import FieldViolation, InvalidInputError

        raise InvalidInputError(
            f"{what} needs about {needed:,} open files; this process may open {hard:,} (its hard limit)",
            [FieldViolation(what, f"raise the limit (ulimit -n {needed}) or lower it")],
        )
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY else hard, hard))


def raise_open_files() -> int | None:
    """Raise this process's soft limit on open files to its hard limit (a server's every
    connection takes one, and the usual soft limit of 1,024 is the first thing a flood of
    connections exhausts); the new soft limit, None where the platform has none."""
    try:
        import resource
    except ImportError:
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # a hard limit of "unlimited" some kernels refuse as a soft one
            return soft
    return hard


__all__ = ["IDLE_TTL_S", "MAX_SESSIONS", "TOOL_TIMEOUT_S", "CallLimits", "ensure_open_files", "exceeded", "raise_open_files"]
