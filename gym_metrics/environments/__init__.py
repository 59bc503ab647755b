"""What an environment author writes and what serves it, with no transport code:
`SimpleResourcesServer` and its hooks (verify, compute_metrics, get_key_metrics), the registry
of environments by name, `ScorerEnvironment` (a row scorer served as an environment), and the
handler that serves one (what each RPC does once its messages are converted).
Tools and per-rollout sessions belong here too."""

from gym_metrics.environments._handler import (
    INVALID_REQUEST,
    TIMEOUT,
    VERIFY_FAILED,
    Aggregation,
    EnvironmentHandler,
    Recorder,
    in_order,
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
from gym_metrics.environments._server import SimpleResourcesServer

__all__ = [
    "INVALID_REQUEST",
    "TIMEOUT",
    "VERIFY_FAILED",
    "Aggregation",
    "EnvironmentHandler",
    "Recorder",
    "in_order",
    "load_module_file",
    "ENTRY_POINT_GROUP",
    "ENVIRONMENTS",
    "ScorerEnvironment",
    "SimpleResourcesServer",
    "register_server",
    "registered_servers",
    "resolve_server",
]
