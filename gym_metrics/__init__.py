"""gym-metrics: score LLM and agent rollouts over gRPC, with NeMo Gym-compatible aggregation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gym_metrics._util.version import __version__

if TYPE_CHECKING:
    from gym_metrics.environments import register_server, resolve_server
    from gym_metrics.aggregate import AgentAggregate, AggregateOptions, Aggregator, MetricColumns, aggregate_file
    from gym_metrics.compare import Comparison, compare_agents
    from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError, NotFoundError, OverloadedError
    from gym_metrics.evaluation import EvaluationScores
    from gym_metrics.models import AgentRef, BaseVerifyRequest, BaseVerifyResponse
    from gym_metrics.reducers import Reducer, ReducerResult, get_reducer, register_reducer
    from gym_metrics.scorers import RowError, Scorer, get_scorer, register_scorer
    from gym_metrics.environments import SimpleResourcesServer


def serve(*args: Any, **kwargs: Any) -> None:
    """Serve an environment over gRPC (see gym_metrics._transport.server.serve)."""
    from gym_metrics._util.grpc_fork import disable_grpc_fork_handlers

    disable_grpc_fork_handlers()  # before grpc is imported: a verify that forks gets a working child
    from gym_metrics._transport.server import serve as _serve

    return _serve(*args, **kwargs)


if TYPE_CHECKING:
    from gym_metrics._transport.client import ResourcesClient
    from gym_metrics._transport.server import RunningServer, ServerConfig, start_server
    from gym_metrics.collector import CollectOptions, CollectResult, collect, collect_async

_LAZY = {
    # Every name is imported on first use: `import gym_metrics` loads neither grpc nor
    # pydantic, and `gym-metrics aggregate` starts without the server's imports (0.2 s).
    "register_server": "gym_metrics.environments",
    "resolve_server": "gym_metrics.environments",
    "AgentAggregate": "gym_metrics.aggregate",
    "AggregateOptions": "gym_metrics.aggregate",
    "Aggregator": "gym_metrics.aggregate",
    "MetricColumns": "gym_metrics.aggregate",
    "aggregate_file": "gym_metrics.aggregate",
    "Comparison": "gym_metrics.compare",
    "compare_agents": "gym_metrics.compare",
    "FieldViolation": "gym_metrics.errors",
    "GymMetricsError": "gym_metrics.errors",
    "InvalidInputError": "gym_metrics.errors",
    "NotFoundError": "gym_metrics.errors",
    "OverloadedError": "gym_metrics.errors",
    "EvaluationScores": "gym_metrics.evaluation",
    "AgentRef": "gym_metrics.models",
    "BaseVerifyRequest": "gym_metrics.models",
    "BaseVerifyResponse": "gym_metrics.models",
    "Reducer": "gym_metrics.reducers",
    "ReducerResult": "gym_metrics.reducers",
    "get_reducer": "gym_metrics.reducers",
    "register_reducer": "gym_metrics.reducers",
    "RowError": "gym_metrics.scorers",
    "Scorer": "gym_metrics.scorers",
    "get_scorer": "gym_metrics.scorers",
    "register_scorer": "gym_metrics.scorers",
    "SimpleResourcesServer": "gym_metrics.environments",
    "Session": "gym_metrics.environments",
    "tool": "gym_metrics.environments",
    "ResourcesClient": "gym_metrics._transport.client",
    "RunningServer": "gym_metrics._transport.server",
    "ServerConfig": "gym_metrics._transport.server",
    "start_server": "gym_metrics._transport.server",
    "CollectOptions": "gym_metrics.collector",
    "CollectResult": "gym_metrics.collector",
    "collect": "gym_metrics.collector",
    "collect_async": "gym_metrics.collector",
}


_OLD_MODULES = ("evaluate", "judge", "metrics")
"""Old modules reached as attributes (`gym_metrics.metrics.Metric`): each warns on import."""


def __getattr__(name: str) -> Any:
    import importlib

    if name in _OLD_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    from gym_metrics._util.deprecated import old_name

    return old_name(__name__, name)  # old names (Metric, RowMetric, ...) warn


__all__ = [
    "CollectOptions",
    "CollectResult",
    "ResourcesClient",
    "Session",
    "tool",
    "RunningServer",
    "ServerConfig",
    "collect",
    "collect_async",
    "start_server",
    "EvaluationScores",
    "RowError",
    "Scorer",
    "get_scorer",
    "register_scorer",
    "AgentAggregate",
    "AgentRef",
    "AggregateOptions",
    "Aggregator",
    "BaseVerifyRequest",
    "BaseVerifyResponse",
    "Comparison",
    "FieldViolation",
    "GymMetricsError",
    "InvalidInputError",
    "MetricColumns",
    "Reducer",
    "ReducerResult",
    "NotFoundError",
    "OverloadedError",
    "SimpleResourcesServer",
    "__version__",
    "aggregate_file",
    "compare_agents",
    "get_reducer",
    "register_reducer",
    "register_server",
    "resolve_server",
    "serve",
]
