"""Remote metrics ("bring your own metric"): each row POSTed to a user's REST endpoint.

`remote`: the request body is rendered from the row by sandboxed Jinja templates and the
scores are read from the JSON answer with JSONPath. `nemo-agent-toolkit-remote`: a NeMo Agent
Toolkit evaluate-item endpoint (`{"evaluator_name", "item"}` in, `$.result.score` out).
See docs/evaluation.md#remote-scorers and docs/metrics.md#remote-scorers.
"""

from gym_metrics.scorers.remote._config import NatRemoteConfig, RemoteMetricConfig, ScoreSpec
from gym_metrics.scorers.remote._http import RemoteClient
from gym_metrics.scorers.remote._scorers import NatRemoteMetric, RemoteMetric
from gym_metrics.scorers.remote._template import BodyTemplate

__all__ = [
    "BodyTemplate",
    "NatRemoteConfig",
    "NatRemoteMetric",
    "RemoteClient",
    "RemoteMetric",
    "RemoteMetricConfig",
    "ScoreSpec",
]
