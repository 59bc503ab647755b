"""NeMo Evaluator's metric classes as pydantic models, each serialised into a registered
gym-metrics scorer name and its config dict: what `get_scorer(name, config)`, `gym-metrics
evaluate --metric NAME --metric-config F` and a job spec (`scorer`, `scorer_config`) take.

The config is checked by the scorer's own Config model when the metric object is built, so a
bad JSONPath or template fails at construction, as in NeMo Evaluator, not mid-run. Secrets
travel as names (`api_key_env`), never values.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

import pydantic
from pydantic import Field

from gym_metrics.scorers import SCORERS
from gym_metrics.sdk._models import Model, SdkModel, Secret, secret_env

_ITEM_FIELD = re.compile(r"^\s*\{\{\s*item\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}\s*$")


class Metric(SdkModel):
    """Base of the SDK metrics: `to_scorer()` -> (scorer name, scorer config)."""

    scorer: ClassVar[str] = ""

    def scorer_config(self) -> dict[str, Any]:
        """The scorer's config dict (JSON-ready; no secret values)."""
        return {}

    def to_scorer(self) -> tuple[str, dict[str, Any]]:
        return self.scorer, self.scorer_config()

    def secrets(self) -> list[str]:
        """Names of the secrets this metric needs (its `api_key_env`, if any)."""
        env = self.scorer_config().get("api_key_env")
        return [env] if isinstance(env, str) else []

    def result_names(self) -> dict[str, str] | None:
        """gym-metrics score name -> the name NeMo Evaluator reports; scores not listed are
        left out. None keeps every score under its own name."""
        return None

    @pydantic.model_validator(mode="after")
    def _scorer_accepts(self) -> Metric:
        config_model = SCORERS.get(self.scorer).Config
        try:
            config_model.model_validate(self.scorer_config())
        except pydantic.ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"{type(self).__name__}: the {self.scorer!r} scorer refuses this config: {problems}") from None
        return self


class ToolCallAccuracyMetric(Metric):
    """RAGAS tool call accuracy (`tool_call_accuracy`): rows hold `user_input` and
    `reference_tool_calls`."""

    scorer: ClassVar[str] = "tool_call_accuracy"
    strict_order: bool = True
    """gym-metrics option: False compares the calls sorted (RAGAS's default is True)."""

    def scorer_config(self) -> dict[str, Any]:
        return {} if self.strict_order else {"strict_order": False}


class ToolCallingMetric(Metric):
    """NeMo Evaluator's tool-calling template metric (`tool_calling`): predictions from the
    row's chat-completions `response`, the reference from the row field the template names."""

    scorer: ClassVar[str] = "tool_calling"
    reference: str = "{{item.expected_tool_calls}}"
    """`{{item.<field>}}`: which top-level row field holds the reference calls."""

    @pydantic.field_validator("reference")
    @classmethod
    def _one_field(cls, value: str) -> str:
        if not _ITEM_FIELD.match(value):
            raise ValueError(
                f"reference {value!r}: gym-metrics reads the reference calls from one top-level row field, "
                "so the template must be exactly '{{item.<field>}}' (no filters, nesting or text)"
            )
        return value

    def scorer_config(self) -> dict[str, Any]:
        match = _ITEM_FIELD.match(self.reference)
        assert match is not None  # checked by the validator
        return {"reference_field": match.group(1)}


class _JudgeMetric(Metric):
    judge_model: Model
    """The judge: an OpenAI-compatible chat-completions model."""

    def scorer_config(self) -> dict[str, Any]:
        return self.judge_model.judge_config()


class TopicAdherenceMetric(_JudgeMetric):
    """RAGAS topic adherence (`topic_adherence`); reported as `topic_adherence(mode=...)`."""

    scorer: ClassVar[str] = "topic_adherence"
    metric_mode: Literal["f1", "precision", "recall"] = "f1"

    def result_names(self) -> dict[str, str] | None:
        return {f"topic_adherence_{self.metric_mode}": f"topic_adherence(mode={self.metric_mode})"}


class AgentGoalAccuracyMetric(_JudgeMetric):
    """RAGAS agent goal accuracy with or without a reference (`agent_goal_accuracy`)."""

    scorer: ClassVar[str] = "agent_goal_accuracy"
    use_reference: bool = True

    def scorer_config(self) -> dict[str, Any]:
        return {**super().scorer_config(), "use_reference": self.use_reference}


class AnswerAccuracyMetric(_JudgeMetric):
    """RAGAS answer accuracy (`answer_accuracy`); reported as `nv_accuracy`, as RAGAS names it."""

    scorer: ClassVar[str] = "answer_accuracy"

    def result_names(self) -> dict[str, str] | None:
        return {"answer_accuracy": "nv_accuracy"}


class JSONScoreParser(SdkModel):
    """Read a score at a JSONPath of the endpoint's JSON answer."""

    json_path: str = Field(min_length=1)

    def to_config(self) -> dict[str, Any]:
        return {"type": "json", "json_path": self.json_path}


class RemoteScore(SdkModel):
    """One score a remote endpoint returns; `parser` defaults to `$.<name>`."""

    name: str
    parser: JSONScoreParser | None = None
    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None

    def to_config(self) -> dict[str, Any]:
        config = self.model_dump(exclude_none=True, exclude={"parser"})
        if self.parser is not None:
            config["parser"] = self.parser.to_config()
        return config


class _RemoteBase(Metric):
    url: str
    timeout_seconds: float | None = None
    max_retries: int | None = None
    api_key_secret: Secret | None = None
    """Sent as `Authorization: Bearer <key>`; the key is read from the secret's variable."""

    def _connection(self) -> dict[str, Any]:
        config: dict[str, Any] = {"url": self.url}
        if self.timeout_seconds is not None:
            config["timeout_seconds"] = self.timeout_seconds
        if self.max_retries is not None:
            config["max_retries"] = self.max_retries
        if self.api_key_secret is not None:
            config["api_key_env"] = secret_env(self.api_key_secret)
        return config


class RemoteMetric(_RemoteBase):
    """Each row POSTed to your endpoint (`remote`): `body` is Jinja over `item`, scores read
    by JSONPath."""

    scorer: ClassVar[str] = "remote"
    body: dict[str, Any]
    scores: list[RemoteScore] = Field(min_length=1)

    def scorer_config(self) -> dict[str, Any]:
        return {"type": "remote", **self._connection(), "body": self.body, "scores": [s.to_config() for s in self.scores]}


class NemoAgentToolkitRemoteMetric(_RemoteBase):
    """A NeMo Agent Toolkit evaluate-item endpoint (`nemo-agent-toolkit-remote`): POSTs
    `{"evaluator_name", "item": row}`, the score at `$.result.score` named after the evaluator."""

    scorer: ClassVar[str] = "nemo-agent-toolkit-remote"
    evaluator_name: str = Field(min_length=1)

    def scorer_config(self) -> dict[str, Any]:
        return {"type": "nemo-agent-toolkit-remote", **self._connection(), "evaluator_name": self.evaluator_name}


__all__ = [
    "AgentGoalAccuracyMetric",
    "AnswerAccuracyMetric",
    "JSONScoreParser",
    "Metric",
    "NemoAgentToolkitRemoteMetric",
    "RemoteMetric",
    "RemoteScore",
    "TopicAdherenceMetric",
    "ToolCallAccuracyMetric",
    "ToolCallingMetric",
]
