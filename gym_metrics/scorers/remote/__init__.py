"""Remote scorers ("bring your own metric"): each row POSTed to a user's REST endpoint.

`remote`: the request body is rendered from the row by sandboxed Jinja templates and the
scores are read from the JSON answer with JSONPath. `nemo-agent-toolkit-remote`: a NeMo Agent
Toolkit evaluate-item endpoint (`{"evaluator_name", "item"}` in, `$.result.score` out).
See docs/evaluation.md#remote-scorers and docs/metrics.md#remote-scorers.
"""

from gym_metrics.scorers.remote._config import NatRemoteConfig, RemoteScorerConfig, ScoreSpec
from gym_metrics.scorers.remote._http import RemoteClient
from gym_metrics.scorers.remote._scorers import NatRemoteScorer, RemoteScorer
from gym_metrics.scorers.remote._template import BodyTemplate

from gym_metrics._util.deprecated import old_names

__all__ = [
    "BodyTemplate",
    "NatRemoteConfig",
    "NatRemoteScorer",
    "RemoteClient",
    "RemoteScorer",
    "RemoteScorerConfig",
    "ScoreSpec",
]


__getattr__ = old_names(__name__)
