"""What an environment author writes and what serves it, with no transport code:
`SimpleResourcesServer` and its hooks (verify, compute_metrics, get_key_metrics), the registry
of environments by name, `ScorerEnvironment` (a row scorer served as an environment), and the
handler that serves one (what each RPC does once its messages are converted); tools (`@tool`)
and per-rollout sessions (Session, SessionStore, Sessions)."""

from gym_metrics.environments._session_calls import MAX_ROW_BYTES, TOOL_TIMEOUT_S, Sessions, row_too_large
from gym_metrics.environments._groups import MAX_COMPLETIONS_PER_CALL, MAX_GROUPS_PER_CALL, Group, GroupScores, check_counts, score_groups, text_response
from gym_metrics.environments._handler import (
    INVALID_REQUEST,
    TIMEOUT,
    VERIFY_FAILED,
    Aggregation,
    EnvironmentHandler,
    Recorder,
)
from gym_metrics.environments._registry import (
    ENTRY_POINT_GROUP,
    ENVIRONMENTS,
    load_module_file,
    register_server,
    registered_servers,
    resolve_server,
)
from gym_metrics.environments._scorer import ScorerEnvironment
from gym_metrics.environments._hooks import hook
from gym_metrics.environments._server import SimpleResourcesServer, close_sandbox
from gym_metrics.environments._sessions import IDLE_TTL_S, MAX_SESSIONS, Session, SessionStore
from gym_metrics.environments._steps import ResetResult, StepResult
from gym_metrics.environments._tools import ToolSpec, output_text, tool, tools_of

from gym_metrics._util.deprecated import old_names

__getattr__ = old_names(__name__)  # Episodes: Sessions

__all__ = [
    "IDLE_TTL_S",
    "MAX_SESSIONS",
    "MAX_ROW_BYTES",
    "TOOL_TIMEOUT_S",
    "Sessions",
    "row_too_large",
    "Group",
    "GroupScores",
    "MAX_COMPLETIONS_PER_CALL",
    "MAX_GROUPS_PER_CALL",
    "check_counts",
    "score_groups",
    "text_response",
    "ResetResult",
    "Session",
    "SessionStore",
    "StepResult",
    "ToolSpec",
    "output_text",
    "tool",
    "tools_of",
    "INVALID_REQUEST",
    "TIMEOUT",
    "VERIFY_FAILED",
    "Aggregation",
    "EnvironmentHandler",
    "Recorder",
    "load_module_file",
    "ENTRY_POINT_GROUP",
    "ENVIRONMENTS",
    "ScorerEnvironment",
    "SimpleResourcesServer",
    "close_sandbox",
    "hook",
    "register_server",
    "registered_servers",
    "resolve_server",
]
