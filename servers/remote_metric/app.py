"""remote_metric: every rollout scored by a remote metric (the user's REST endpoint).

`verify` renders the configured request body from the rollout's fields, POSTs it to the
endpoint (retries, timeout, bearer key: gym_metrics/scorers/remote) and returns every parsed score as
a field of the response, the first score as the reward. The config is the `remote` /
`nemo-agent-toolkit-remote` metric's file (JSON, or YAML when pyyaml is installed), named by
the `REMOTE_METRIC_CONFIG` environment variable and read when the environment is created, so a
bad config fails at `serve`, not on the first rollout.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gym_metrics_servers.llm_judge.app import response_text
from pydantic import Field

from gym_metrics import (
    BaseVerifyRequest,
    BaseVerifyResponse,
    SimpleResourcesServer,
    register_server,
)
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError
from gym_metrics.scorers import RowError, get_scorer
from gym_metrics.evaluation import read_scorer_config
from gym_metrics.scorers.remote import RemoteMetric

CONFIG_FILE_VAR = "REMOTE_METRIC_CONFIG"
ENDPOINT_FAILURE_FIELDS = ("endpoint",)
"""RowError fields meaning the endpoint failed (HTTP error, timeout, bad answer), not the
rollout's data; `response.<score>` (an unreadable score) is one too."""


def load_metric(environ: Mapping[str, str] | None = None) -> RemoteMetric | None:
    """The metric the `REMOTE_METRIC_CONFIG` file configures; None when the variable is unset."""
    env = os.environ if environ is None else environ
    path = env.get(CONFIG_FILE_VAR)
    if not path:
        return None
    file = Path(path)
    if not file.is_file():
        raise InvalidInputError(f"{CONFIG_FILE_VAR}: no such file: {file}")
    config = read_scorer_config(file) or {}
    metric = get_scorer("remote", config)  # the file's `type` picks the format
    assert isinstance(metric, RemoteMetric)
    return metric


class RemoteMetricVerifyRequest(BaseVerifyRequest):
    """One rollout: every field is a column the body templates can use (`{{ item.<field> }}`),
    kept as sent (extra fields allowed)."""

    response: dict[str, Any] | str = Field(default_factory=dict)  # type: ignore[assignment]
    """The model's response: a Responses API object (its output text is also the row's
    `output_text`) or plain text."""


class RemoteMetricVerifyResponse(BaseVerifyResponse):
    """The endpoint's scores, each as a field (so each aggregates as `mean/<score>`)."""

    metric: str = ""
    """`remote` or `nemo-agent-toolkit-remote`."""


def build_row(body: RemoteMetricVerifyRequest) -> dict[str, Any]:
    """The template's `item`: the request's fields, plus `output_text` (the response's text)."""
    row = body.model_dump()
    text = body.response if isinstance(body.response, str) else response_text(body.response)
    if text is not None:
        row.setdefault("output_text", text)
    return row


@register_server("remote_metric")
class RemoteMetricServer(SimpleResourcesServer):
    """Reward = the remote metric's first score; every score is a response field."""

    name = "remote_metric"

    def __init__(self, metric: RemoteMetric | None = None) -> None:
        self.metric = metric if metric is not None else load_metric()
        if self.metric is not None:
            taken = sorted(set(self.metric.score_names) & set(RemoteMetricVerifyResponse.model_fields))
            if taken:  # e.g. a NAT evaluator named "reward": its score would overwrite that field
                raise InvalidInputError(
                    f"remote_metric: score name {taken[0]!r} is a field of the verify response itself; "
                    "rename the score (for nemo-agent-toolkit-remote, give `scores`)"
                )

    def server_info(self) -> dict[str, Any]:
        """Also declares the configured scores in the verify response schema (numbers), so
        `gym-metrics evaluate --server` reports each of them, not only the reward."""
        info = super().server_info()
        if self.metric is not None:
            properties = info["verify_response_schema"].setdefault("properties", {})
            for name in self.metric.score_names:
                properties.setdefault(name, {"type": "number", "title": name})
        return info

    async def verify(self, body: RemoteMetricVerifyRequest) -> RemoteMetricVerifyResponse:
        metric = self.metric
        if metric is None:
            raise GymMetricsError(f"remote_metric is not configured: set {CONFIG_FILE_VAR} to the metric's config file")
        try:
            scores = await metric.score(build_row(body))
        except RowError as exc:
            if exc.field in ENDPOINT_FAILURE_FIELDS or exc.field.startswith("response."):
                raise  # the endpoint failed: this rollout is recorded as failed, with the reason
            raise InvalidInputError(
                f"{metric.config.type}: rollout cannot be scored",  # type: ignore[attr-defined]
                [FieldViolation(exc.field, exc.reason)],
            ) from None
        main = metric.score_names[0]
        reward = float(scores.get(main, math.nan))
        if not math.isfinite(reward):
            raise RowError("endpoint", f"the answer has no {main} score")
        values = {name: float(scores[name]) for name in metric.score_names if name in scores}
        return RemoteMetricVerifyResponse(reward=reward, metric=metric.config.type, **values)  # type: ignore[attr-defined]
