"""remote_metric: every rollout scored by a remote metric (the user's REST endpoint).

`verify` renders the configured request body from the rollout's fields, POSTs it to the
endpoint (retries, timeout, bearer key: gym_metrics/scorers/remote) and returns every parsed score as
a field of the response, the first score as the reward. The config is the `remote` /
`nemo-agent-toolkit-remote` metric's file (JSON, or YAML when pyyaml is installed), named by
the `REMOTE_METRIC_CONFIG` environment variable and read when the environment is created, so a
bad config fails at `serve`, not on the first rollout.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gym_metrics_servers.llm_judge.app import response_text
from pydantic import Field

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, register_server
from gym_metrics.errors import InvalidInputError
from gym_metrics.environments import ScorerEnvironment
from gym_metrics.scorers import Scorer, get_scorer
from gym_metrics.evaluation import read_scorer_config
from gym_metrics.scorers.remote import RemoteScorer

CONFIG_FILE_VAR = "REMOTE_METRIC_CONFIG"
ENDPOINT_FAILURE_FIELDS = ("endpoint",)
"""RowError fields meaning the endpoint failed (HTTP error, timeout, bad answer), not the
rollout's data; `response.<score>` (an unreadable score) is one too."""


def load_metric(environ: Mapping[str, str] | None = None) -> RemoteScorer | None:
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
    assert isinstance(metric, RemoteScorer)
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
class RemoteMetricServer(ScorerEnvironment):
    """Reward = the remote metric's first score; every score is a response field (and is
    declared in GetServerInfo's response schema, so `gym-metrics evaluate --server` reports it)."""

    name = "remote_metric"
    label_field = "metric"
    # The endpoint failed (HTTP error, timeout, bad answer, an unreadable `response.<score>`):
    # the rollout is recorded as failed, with the reason.
    backend_failures = (*ENDPOINT_FAILURE_FIELDS, "response.*")
    violation_prefix = ""  # the template's field names are the violation's
    no_reward_field = "endpoint"
    no_reward_message = "the answer has no {score} score"
    not_configured = f"remote_metric is not configured: set {CONFIG_FILE_VAR} to the metric's config file"
    rename_hint = " (for nemo-agent-toolkit-remote, give `scores`)"

    def __init__(self, metric: RemoteScorer | None = None) -> None:
        super().__init__(metric)

    def load_scorer(self) -> RemoteScorer | None:
        return load_metric()

    def scorer_label(self, scorer: Scorer) -> str:
        """`remote` or `nemo-agent-toolkit-remote`: the config's format."""
        return str(scorer.config.type)  # type: ignore[attr-defined]

    def build_row(self, body: RemoteMetricVerifyRequest) -> dict[str, Any]:  # type: ignore[override]
        return build_row(body)

    async def verify(self, body: RemoteMetricVerifyRequest) -> RemoteMetricVerifyResponse:
        return await self.score_rollout(body)
