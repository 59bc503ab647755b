"""remote_metric: rollouts scored by the user's own REST endpoint (see README.md)."""

from gym_metrics_servers.remote_metric.app import (
    CONFIG_FILE_VAR,
    RemoteMetricServer,
    RemoteMetricVerifyRequest,
    RemoteMetricVerifyResponse,
    load_metric,
)

__all__ = [
    "CONFIG_FILE_VAR",
    "RemoteMetricServer",
    "RemoteMetricVerifyRequest",
    "RemoteMetricVerifyResponse",
    "load_metric",
]
