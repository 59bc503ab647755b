"""NeMo Gym's failure vocabulary: the names a rollout's `failure_kind` takes (`judge_failed`,
`verifier_error`, ...), the stages an episode fails in, and the checks environments run on a
name (`is_registered`, `is_namespaced`: an environment's own `<server>:<kind>`). A name says
what went wrong, nothing else, so it is safe as a metric label."""

from __future__ import annotations

import logging
import re
from typing import Literal

logger = logging.getLogger(__name__)

FailureStage = Literal["admission", "seed", "agent", "verification", "cleanup"]

TRANSPORT_UNREACHABLE = "transport_unreachable"
TRANSPORT_PEER_DROP = "transport_peer_drop"
TRANSPORT_TIMEOUT = "transport_timeout"
TRANSPORT_LOCAL_RESOURCE = "transport_local_resource"
AGENT_RUN_ERROR = "agent_run_error"
AGENT_REQUEST_FAILED = "agent_request_failed"
AGENT_TIMEOUT = "agent_timeout"
AGENT_COMMAND_NOT_ALLOWED = "agent_command_not_allowed"
JUDGE_FAILED = "judge_failed"
JUDGE_UNPARSEABLE = "judge_unparseable"
VERIFIER_ERROR = "verifier_error"
PROVIDER_UNAVAILABLE = "provider_unavailable"
PROVIDER_QUOTA_EXHAUSTED = "provider_quota_exhausted"
PROVIDER_OOM_KILLED = "provider_oom_killed"
SESSION_LOST = "session_lost"
SESSION_EXPIRED = "session_expired"
SESSION_RELEASE_FAILED = "session_release_failed"
CANCELLED = "cancelled"
KILL_SHAPED = "kill_shaped"
SHUTDOWN = "shutdown"
PERSISTENCE_FAILED = "persistence_failed"
COHORT_INCOMPLETE = "cohort_incomplete"

FAILURE_KINDS: frozenset[str] = frozenset(
    value for key, value in dict(globals()).items() if key.isupper() and isinstance(value, str) and key != "FailureStage"
)

_NAMESPACED = re.compile(r"[a-z][a-z0-9_]*:[a-z][a-z0-9_]*")
_warned: set[str] = set()


def is_registered(name: str) -> bool:
    return name in FAILURE_KINDS


def is_namespaced(name: str) -> bool:
    """`<server>:<kind>`, both lower-case identifiers (a trailing newline does not pass)."""
    return _NAMESPACED.fullmatch(name) is not None


def validate_failure_kind(name: str | None) -> str | None:
    """`name` as given; an unknown one is logged once (kept, never dropped), as NeMo Gym does."""
    if name is not None and not is_registered(name) and not is_namespaced(name) and name not in _warned:
        _warned.add(name)
        logger.warning("unregistered failure_kind %r: use a registered name or namespace it as '<server>:<kind>'", name)
    return name


__all__ = sorted([*(k for k in dict(globals()) if k.isupper()), "FailureStage", "is_namespaced", "is_registered", "validate_failure_kind"])
