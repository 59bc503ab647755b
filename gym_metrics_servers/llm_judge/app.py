"""llm_judge: every rollout scored by an LLM-judge row metric (see README.md).

`verify` runs the configured judge metric (topic_adherence, agent_goal_accuracy,
answer_accuracy, trajectory, or any registered row metric) on the rollout's fields and returns
every score as a field of the response, the metric's first score as the reward. Configuration
comes from environment variables, or from a JSON file one of them names, read when the
environment is created (so a bad config fails at `serve`, not on the first rollout).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from gym_metrics import BaseVerifyRequest, BaseVerifyResponse, register_server
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.environments import ScorerEnvironment
from gym_metrics.scorers import Scorer, get_scorer

CONFIG_FILE_VAR = "LLM_JUDGE_CONFIG"
METRIC_VAR = "LLM_JUDGE_METRIC"
JUDGE_VARS = {
    "url": "LLM_JUDGE_URL",
    "model": "LLM_JUDGE_MODEL",
    "api_key_env": "LLM_JUDGE_API_KEY_ENV",
    "temperature": "LLM_JUDGE_TEMPERATURE",
    "max_tokens": "LLM_JUDGE_MAX_TOKENS",
    "timeout_seconds": "LLM_JUDGE_TIMEOUT_SECONDS",
    "max_retries": "LLM_JUDGE_MAX_RETRIES",
    "max_concurrency": "LLM_JUDGE_MAX_CONCURRENCY",
}
"""Config key -> the environment variable that sets it (overriding the config file)."""
JUDGE_FAILURE_FIELDS = ("judge", "judge_reply")
"""RowError fields meaning the judge failed, not the rollout's data."""


class JudgeSettings:
    """Which metric, with which config: from a JSON file and/or environment variables."""

    def __init__(self, metric: str, config: dict[str, Any]) -> None:
        self.metric, self.config = metric, config

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JudgeSettings | None:
        """None when nothing is configured. The file (`LLM_JUDGE_CONFIG`) holds
        `{"metric": NAME, "config": {...}}`; each `LLM_JUDGE_*` variable overrides one key."""
        env = os.environ if environ is None else environ
        if not any(env.get(var) for var in (CONFIG_FILE_VAR, METRIC_VAR, *JUDGE_VARS.values())):
            return None
        metric: Any = None
        config: dict[str, Any] = {}
        path = env.get(CONFIG_FILE_VAR)
        if path:
            data = _read_json(Path(path))
            metric = data.get("metric")
            config = data.get("config", {})
            if not isinstance(config, dict):
                raise InvalidInputError(f"{path}: bad judge config", [FieldViolation("config", "must be an object")])
        metric = env.get(METRIC_VAR) or metric
        if not isinstance(metric, str) or not metric:
            raise InvalidInputError(
                "llm_judge: no metric configured",
                [FieldViolation(METRIC_VAR, f"set it, or 'metric' in the {CONFIG_FILE_VAR} file")],
            )
        for key, var in JUDGE_VARS.items():
            value = env.get(var)
            if value:
                config[key] = value  # strings; the metric's pydantic config converts them
        return cls(metric, config)

    def build(self) -> Scorer:
        return get_scorer(self.metric, self.config)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInputError(f"{CONFIG_FILE_VAR}: cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise InvalidInputError(f"{CONFIG_FILE_VAR}: {path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"{CONFIG_FILE_VAR}: {path} must hold a JSON object")
    return data


def response_text(response: Any) -> str | None:
    """The output text of a Responses API response (message items' output_text parts)."""
    if not isinstance(response, Mapping) or not isinstance(response.get("output"), list):
        return None
    parts = []
    for item in response["output"]:
        if isinstance(item, Mapping) and item.get("type", "message") == "message":
            content = item.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(
                    p["text"] for p in content
                    if isinstance(p, Mapping) and p.get("type", "output_text") == "output_text" and isinstance(p.get("text"), str)
                )
    return "\n".join(parts) if parts else None


def last_user_text(params: Any) -> str | None:
    """The last user input of a Responses API request (`input` as text or as messages)."""
    if not isinstance(params, Mapping):
        return None
    given = params.get("input")
    if isinstance(given, str):
        return given
    if not isinstance(given, list):
        return None
    for item in reversed(given):
        if isinstance(item, Mapping) and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                texts = [p.get("text") for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
                return "\n".join(texts) if texts else None
    return None


class LlmJudgeVerifyRequest(BaseVerifyRequest):
    """One rollout: the fields the configured metric reads, kept as sent (extra fields allowed).

    `response` may be the plain response text (RAGAS's `response`) or a Responses API object,
    whose output text then becomes the row's `response` (and `generated_answer`).
    """

    response: dict[str, Any] | str = Field(default_factory=dict)  # type: ignore[assignment]
    """The model's response: a Responses API object or its text."""
    model_output: str | None = None
    """Plain response text, used when `response` holds none."""


class LlmJudgeVerifyResponse(BaseVerifyResponse):
    """The metric's scores, each as a field (so each aggregates as `mean/<score>`)."""

    metric: str = ""
    """The row metric that scored the rollout."""


def build_row(body: LlmJudgeVerifyRequest) -> dict[str, Any]:
    """The metric's row: the request's fields, with text taken from Responses API objects."""
    row = body.model_dump(exclude={"response", "model_output"})
    text = body.response if isinstance(body.response, str) else response_text(body.response)
    text = text if text is not None else body.model_output
    if text is not None:
        row["response"] = text
        row.setdefault("generated_answer", text)
    if "user_input" not in row and "question" not in row:
        question = last_user_text(body.responses_create_params)
        if question is not None:
            row["user_input"] = question
    return row


@register_server("llm_judge")
class LlmJudgeServer(ScorerEnvironment):
    """Reward = the judge metric's main score; every score is a response field."""

    name = "llm_judge"
    label_field = "metric"
    backend_failures = JUDGE_FAILURE_FIELDS  # the judge failed: the rollout is recorded as failed
    no_reward_field = "judge_reply"
    not_configured = (
        f"llm_judge is not configured: set {CONFIG_FILE_VAR} (a JSON file) or {METRIC_VAR}, "
        f"{JUDGE_VARS['url']} and {JUDGE_VARS['model']}"
    )
    declare_scores = False  # GetServerInfo's response schema as it always was

    def __init__(self, metric: Scorer | None = None) -> None:
        super().__init__(metric)

    def load_scorer(self) -> Scorer | None:
        settings = JudgeSettings.from_env()
        return settings.build() if settings else None

    def build_row(self, body: LlmJudgeVerifyRequest) -> dict[str, Any]:  # type: ignore[override]
        return build_row(body)

    async def verify(self, body: LlmJudgeVerifyRequest) -> LlmJudgeVerifyResponse:
        return await self.score_rollout(body)
