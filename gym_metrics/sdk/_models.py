"""NeMo Evaluator's models, secrets and run configs, each turned into the plain config dicts
gym-metrics already reads (a TARGET.json dict, evaluate's knobs), so a script written for NeMo
Evaluator says the same things to gym-metrics.

An argument NeMo Evaluator has and gym-metrics does not is refused by name, never dropped:
a silently ignored sampling parameter or retry setting would change the numbers unnoticed.
"""

from __future__ import annotations

import re
from typing import Any, Union

import pydantic
from pydantic import Field

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SdkModel(pydantic.BaseModel):
    """Base of every SDK object: an unknown argument is an error that names it and says that
    gym-metrics has no equivalent (pydantic's own message only says "extra inputs")."""

    model_config = pydantic.ConfigDict(extra="allow", frozen=True)

    @pydantic.model_validator(mode="after")
    def _no_unknown_arguments(self) -> SdkModel:
        extra = sorted(self.model_extra or {})
        if extra:
            known = ", ".join(type(self).model_fields) or "none"
            raise ValueError(
                f"{type(self).__name__}: argument(s) {', '.join(map(repr, extra))} have no gym-metrics equivalent "
                f"(accepted: {known}); see docs/sdk.md"
            )
        return self


class SecretRef(pydantic.RootModel[str]):
    """A secret by NAME (`SecretRef(root="my-key")`); its value is never part of a config."""

    root: str = Field(min_length=1)


Secret = Union[str, SecretRef]


def secret_env(secret: Secret | None) -> str | None:
    """The environment-variable name a secret is read from (`api_key_env`).

    A name that already is one (`NVIDIA_API_KEY`) is kept; a platform-style name
    (`nvidia-api-key`, `my.key`) becomes upper snake case (`NVIDIA_API_KEY`), since a shell
    cannot export a variable with dashes and the job server accepts only such names."""
    if secret is None:
        return None
    name = secret.root if isinstance(secret, SecretRef) else secret
    if not isinstance(name, str):
        raise ValueError(f"a secret is given by its name (a string or SecretRef), not {type(secret).__name__}")
    if not name.strip():
        raise ValueError("a secret's name is empty: give the name it is stored under (NVIDIA_API_KEY, nvidia-api-key)")
    if _ENV_NAME.match(name):
        return name
    mapped = re.sub(r"[^A-Za-z0-9_]", "_", name).upper()
    if not _ENV_NAME.match(mapped):
        raise ValueError(f"secret name {name!r} cannot name an environment variable (it must not start with a digit)")
    return mapped


class Model(SdkModel):
    """An OpenAI-compatible model: a judge (`judge_model=`) or a generation target (`target=`)."""

    url: str = Field(min_length=1)
    """Base URL (`http://host/v1`) or the full `.../chat/completions` URL."""
    name: str = Field(min_length=1)
    """The model name sent in every request."""
    api_key_secret: Secret | None = None
    """The secret holding the bearer key, by name (see `secret_env`)."""

    def api_key_env(self) -> str | None:
        return secret_env(self.api_key_secret)

    def judge_config(self) -> dict[str, Any]:
        """The JudgeConfig keys of this model (gym_metrics.scorers.judge)."""
        config: dict[str, Any] = {"url": self.url, "model": self.name}
        if self.api_key_secret is not None:
            config["api_key_env"] = self.api_key_env()
        return config

    def target_config(self) -> dict[str, Any]:
        """The TARGET.json dict of this model (docs/targets.md), without run options."""
        return {"type": "model", **self.judge_config()}


class Agent(SdkModel):
    """An agent behind an HTTP endpoint (gym-metrics' agent target, docs/targets.md): a
    templated `body` in, the answer read at `response_path`."""

    url: str = Field(min_length=1)
    body: dict[str, Any]
    """Request body; string values are Jinja over `item` (the row)."""
    response_path: str = Field(min_length=1)
    """JSONPath of the answer text in the agent's reply."""
    tool_calls_path: str | None = None
    """JSONPath of the agent's tool calls, if it makes any."""
    api_key_secret: Secret | None = None

    def target_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"type": "agent", "url": self.url, "body": self.body, "response_path": self.response_path}
        if self.tool_calls_path is not None:
            config["tool_calls_path"] = self.tool_calls_path
        if self.api_key_secret is not None:
            config["api_key_env"] = secret_env(self.api_key_secret)
        return config


class InferenceParams(SdkModel):
    """Sampling parameters of a model target (the target config's `inference`)."""

    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None


class ReasoningParams(SdkModel):
    """Where a reasoning model's thinking ends (the target config's `reasoning`)."""

    end_token: str | None = None


class RunConfig(SdkModel):
    """Offline scoring: rows in flight and how many rows."""

    parallelism: int = Field(default=16, ge=1)
    limit_samples: int | None = Field(default=None, ge=0)

    def target_options(self) -> dict[str, Any]:
        """What this config adds to a target's config (nothing for offline scoring)."""
        return {}


class RunConfigOnline(RunConfig):
    """Online scoring with an agent target."""


class RunConfigOnlineModel(RunConfig):
    """Online scoring with a model target: sampling, a system prompt, reasoning removal."""

    inference: InferenceParams | None = None
    system_prompt: str | None = None
    reasoning: ReasoningParams | None = None

    def target_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {}
        if self.inference is not None:
            options["inference"] = self.inference.model_dump(exclude_none=True)
        if self.system_prompt is not None:
            options["system_prompt"] = self.system_prompt
        if self.reasoning is not None:
            options["reasoning"] = self.reasoning.model_dump(exclude_none=True)
        return options


def target_config(target: Model | Agent | None, config: RunConfig) -> dict[str, Any] | None:
    """The target config dict `evaluate(target=...)` and a job spec take; a run config that
    does not fit the target is an error naming both."""
    if target is None:
        if isinstance(config, (RunConfigOnline, RunConfigOnlineModel)):
            raise ValueError(f"{type(config).__name__} is for online scoring: give target=Model(...) or Agent(...)")
        return None
    if isinstance(target, Model):
        if isinstance(config, RunConfigOnline):
            raise ValueError("RunConfigOnline goes with an Agent target; use RunConfigOnlineModel with a Model")
        return {**target.target_config(), **config.target_options()}
    if isinstance(target, Agent):
        if isinstance(config, RunConfigOnlineModel):
            raise ValueError("RunConfigOnlineModel goes with a Model target; use RunConfigOnline with an Agent")
        return target.target_config()
    raise TypeError(f"target must be Model(...) or Agent(...), not {type(target).__name__}")


__all__ = [
    "Agent",
    "InferenceParams",
    "Model",
    "ReasoningParams",
    "RunConfig",
    "RunConfigOnline",
    "RunConfigOnlineModel",
    "SecretRef",
    "secret_env",
    "target_config",
]
