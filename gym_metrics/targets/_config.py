"""Target configs: which OpenAI-compatible model or agent generates, parsed from a dict (a
TARGET.json file) with errors that name the field.

The connection knobs (`api_key_env`, `timeout_seconds`, `max_retries`, `max_concurrency`,
`backoff_seconds`, `max_backoff_seconds`) are the shared HttpClientConfig's, under the same keys
as the judge's and the remote scorer's; `timeout_s` and `concurrency` are accepted as their
short names. The API key itself is never part of a config: only the NAME of its variable.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union

import orjson
import pydantic
from pydantic import Field

from gym_metrics._util.http import HttpClientConfig
from gym_metrics.errors import FieldViolation, InvalidInputError

_SHORT_NAMES = {"timeout_s": "timeout_seconds", "concurrency": "max_concurrency"}


class Inference(pydantic.BaseModel):
    """Sampling parameters sent with every request; a None leaves the request's own value (or
    the server's default) in place."""

    model_config = pydantic.ConfigDict(extra="forbid")

    temperature: float | None = Field(default=None, ge=0.0)
    """Sampling temperature."""
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    """Nucleus sampling mass."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Most tokens generated (`max_tokens` in chat, `max_output_tokens` in responses)."""
    seed: int | None = None
    """Sampling seed, passed through as `seed` when given (vLLM, SGLang and NIM honour it)."""


class Reasoning(pydantic.BaseModel):
    """How a reasoning model marks the end of its thinking, so scorers see only the answer."""

    model_config = pydantic.ConfigDict(extra="forbid")

    end_token: str | None = Field(default=None, min_length=1)
    """Text that ends the reasoning part (e.g. `</think>`); everything up to and including its
    last occurrence is removed from the answer. None: nothing is removed."""
    think_tags: bool | None = None
    """With the chat API: whether `<think>...</think>` blocks of an answer's text become its
    reasoning item (NeMo Gym's converter) or stay in the text. None: `collect` makes them
    reasoning, as NeMo Gym's agents see them, unless an `end_token` is given; `evaluate` keeps
    them in the text, as NeMo Evaluator scores it."""


class _TargetConfig(HttpClientConfig):
    """What both target kinds share: the HTTP knobs and their short names."""

    @pydantic.model_validator(mode="before")
    @classmethod
    def _short_names(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        out = dict(data)
        for short, long in _SHORT_NAMES.items():
            if short in out:
                if long in out:
                    raise ValueError(f"give {short!r} or {long!r}, not both")
                out[long] = out.pop(short)
        return out


class ModelTargetConfig(_TargetConfig):
    """An OpenAI-compatible model server (vLLM, SGLang, NIM, OpenAI)."""

    type: Literal["model"] = "model"
    """Discriminator of TARGET.json."""
    url: str = Field(min_length=1)
    """Base URL such as `http://127.0.0.1:8000/v1`: requests go to `{url}/chat/completions` or
    `{url}/responses`."""
    model: str = Field(min_length=1)
    """Model name sent as `model` in every request."""
    api: Literal["chat", "responses"] = "chat"
    """Which endpoint is called; the answer is Responses-shaped either way."""
    inference: Inference = Field(default_factory=Inference)
    """Sampling parameters that override the request's when given."""
    system_prompt: str | None = None
    """A system message put in front of every request's messages."""
    reasoning: Reasoning = Field(default_factory=Reasoning)
    """Reasoning-part removal (`end_token`)."""

    def endpoint(self) -> str:
        """The full URL of the configured API."""
        suffix = "/chat/completions" if self.api == "chat" else "/responses"
        url = self.url.rstrip("/")
        return url if url.endswith(suffix) else url + suffix


class AgentTargetConfig(_TargetConfig):
    """An agent behind a custom HTTP endpoint: a templated body in, an answer read by JSONPath."""

    type: Literal["agent"]
    """Discriminator of TARGET.json."""
    url: str = Field(min_length=1)
    """The full URL the body is POSTed to."""
    body: dict[str, Any]
    """The JSON request body; string values are sandboxed Jinja over `item` (the row), as in
    remote scorers (a value that is exactly one `{{ expr }}` keeps its type)."""
    response_path: str = Field(min_length=1)
    """JSONPath of the answer text in the agent's JSON reply (first match)."""
    tool_calls_path: str | None = None
    """JSONPath of the agent's tool calls (a list of `{name, arguments}` or chat-completions
    `{id, function: {name, arguments}}`), when it makes any."""

    @pydantic.field_validator("body")
    @classmethod
    def _body_compiles(cls, value: dict[str, Any]) -> dict[str, Any]:
        from gym_metrics.scorers.remote import BodyTemplate

        BodyTemplate(value)  # ValueError naming the value whose template does not compile
        return value

    @pydantic.field_validator("response_path", "tool_calls_path")
    @classmethod
    def _paths_parse(cls, value: str | None) -> str | None:
        if value is not None:
            from gym_metrics._util.jsonpath import compile_path

            compile_path(value)  # ValueError: not a JSONPath, or refused (a regex, nested `..`)
        return value


TargetConfig = Union[ModelTargetConfig, AgentTargetConfig]


def parse_target(data: Any, *, source: str = "target") -> TargetConfig:
    """The config of `data` (`type` "model", the default, or "agent"); InvalidInputError with
    one violation per bad field, each named as `{source}.<path>`."""
    if not isinstance(data, Mapping):
        raise InvalidInputError("target config must be a JSON object", [FieldViolation(source, type(data).__name__)])
    kind = data.get("type", "model")
    models: dict[Any, type[ModelTargetConfig] | type[AgentTargetConfig]] = {"model": ModelTargetConfig, "agent": AgentTargetConfig}
    model = models.get(kind)
    if model is None:
        raise InvalidInputError("bad target config", [FieldViolation(f"{source}.type", f"must be 'model' or 'agent', not {kind!r}")])
    try:
        return model.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        violations = [
            FieldViolation(".".join([source, *(str(p) for p in err["loc"])]), err["msg"]) for err in exc.errors()
        ]
        raise InvalidInputError("bad target config", violations) from None


def load_target(path: str | Path) -> TargetConfig:
    """The config in JSON file `path`; errors name the file and the field."""
    path = Path(path)
    try:
        data = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise InvalidInputError("cannot read the target config", [FieldViolation(str(path), exc.strerror or str(exc))]) from None
    except orjson.JSONDecodeError as exc:
        raise InvalidInputError("target config is not JSON", [FieldViolation(str(path), str(exc))]) from None
    return parse_target(data, source=str(path))
