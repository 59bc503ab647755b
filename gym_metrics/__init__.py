"""gym-metrics: score LLM and agent rollouts over gRPC, with NeMo Gym-compatible aggregation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from gym_metrics._environments import register_server, resolve_server
from gym_metrics.aggregate import AgentAggregate, AggregateOptions, Aggregator, MetricColumns, aggregate_file
from gym_metrics.compare import Comparison, compare_agents
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError, NotFoundError, OverloadedError

# `evaluate` is the module, as it always was (`gym_metrics.evaluate.evaluate(...)`); the function
# re-exported here would hide it.
from gym_metrics import evaluate as evaluate

# `metrics`: the reducers under their first names, still importable as gym_metrics.metrics.
from gym_metrics import metrics as metrics
from gym_metrics.evaluation import EvaluationResult
from gym_metrics.models import AgentRef, BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.reducers import Reducer, ReducerResult, get_reducer, register_reducer
from gym_metrics.scorers import (  # RowMetric & co.: the NeMo Evaluator-style names of the same objects
    RowError,
    RowMetric,
    Scorer,
    get_row_metric,
    get_scorer,
    register_row_metric,
    register_scorer,
)
from gym_metrics.server import SimpleResourcesServer

Metric = Reducer
"""The reducer base class under its first name (also `gym_metrics.metrics.Metric`)."""
MetricResult = ReducerResult
get_metric = get_reducer
register_metric = register_reducer


def serve(*args: Any, **kwargs: Any) -> None:
    """Serve an environment over gRPC (see gym_metrics._transport.serve)."""
    from gym_metrics._transport import serve as _serve

    return _serve(*args, **kwargs)


if TYPE_CHECKING:
    from gym_metrics._transport import ResourcesClient, RunningServer, ServerConfig, start_server
    from gym_metrics.collector import CollectOptions, CollectResult, collect, collect_async

_LAZY = {
    # grpc is loaded only by what talks over it: `import gym_metrics` stays light.
    "ResourcesClient": "gym_metrics._transport",
    "RunningServer": "gym_metrics._transport",
    "ServerConfig": "gym_metrics._transport",
    "start_server": "gym_metrics._transport",
    "CollectOptions": "gym_metrics.collector",
    "CollectResult": "gym_metrics.collector",
    "collect": "gym_metrics.collector",
    "collect_async": "gym_metrics.collector",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CollectOptions",
    "CollectResult",
    "ResourcesClient",
    "RunningServer",
    "ServerConfig",
    "collect",
    "collect_async",
    "start_server",
    "EvaluationResult",
    "RowError",
    "RowMetric",
    "Scorer",
    "get_row_metric",
    "get_scorer",
    "register_row_metric",
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
    "Metric",
    "MetricColumns",
    "MetricResult",
    "Reducer",
    "ReducerResult",
    "NotFoundError",
    "OverloadedError",
    "SimpleResourcesServer",
    "__version__",
    "aggregate_file",
    "compare_agents",
    "get_metric",
    "get_reducer",
    "register_metric",
    "register_reducer",
    "register_server",
    "resolve_server",
    "serve",
]
