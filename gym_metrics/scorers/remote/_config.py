"""The remote metric's configuration (the `--metric-config` file), validated by pydantic.

The connection knobs are the shared HttpClientConfig's. The API key is never part of the
config: only the NAME of the environment variable holding it.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import pydantic
from pydantic import Field

from gym_metrics._util.http import HttpClientConfig

REMOTE: Final = "remote"
NAT: Final = "nemo-agent-toolkit-remote"
NAT_SCORE_PATH = "$.result.score"


class ParserSpec(pydantic.BaseModel):
    """How a score is read from the endpoint's JSON answer."""

    model_config = pydantic.ConfigDict(extra="forbid")

    type: Literal["json"] = "json"
    json_path: str = Field(min_length=1)
    """A JSONPath such as `$.result.accuracy` (jsonpath-ng syntax)."""

    @pydantic.field_validator("json_path")
    @classmethod
    def _parses(cls, value: str) -> str:
        from gym_metrics._util.jsonpath import compile_path

        compile_path(value)  # ValueError: not a JSONPath, or refused (a regex, nested `..`)
        return value


class ScoreSpec(pydantic.BaseModel):
    """One score the endpoint returns."""

    model_config = pydantic.ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9_]+$")
    """Lower-case letters, digits and underscores (NeMo Evaluator SDK's rule)."""
    parser: ParserSpec
    """Default, as in the SDK: the JSONPath is the score's name (`accuracy` reads `$.accuracy`)."""
    description: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    """A value outside [minimum, maximum] is kept as it is and flagged: the row's
    `<name>_out_of_range` score is 1.0 (0.0 when in range, NaN when the score is NaN)."""

    @pydantic.model_validator(mode="before")
    @classmethod
    def _default_parser(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("parser") is None and isinstance(data.get("name"), str):
            return {**data, "parser": {"type": "json", "json_path": data["name"]}}
        return data

    @pydantic.model_validator(mode="after")
    def _bounds(self) -> ScoreSpec:
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise ValueError(f"minimum {self.minimum} is above maximum {self.maximum}")
        return self

    @property
    def bounded(self) -> bool:
        return self.minimum is not None or self.maximum is not None


class RemoteScorerConfig(HttpClientConfig):
    """A user's scoring endpoint: where (`url`, the full URL requests are POSTed to), what to
    send, what to read back, and how hard to push it (the shared HttpClientConfig knobs; only
    408, 429, 500, 502, 503 and 504 of the statuses are retried)."""

    type: Literal["remote", "nemo-agent-toolkit-remote"] = REMOTE
    """`remote`: generic (needs `body` and `scores`). `nemo-agent-toolkit-remote`: a NeMo Agent
    Toolkit evaluate-item endpoint (needs `evaluator_name`)."""
    body: dict[str, Any] | None = None
    """The JSON request body; its string values (at any depth) are Jinja templates over the
    row, as `{{ item.<column> }}`. A value that is exactly one `{{ expr }}` keeps its type."""
    scores: list[ScoreSpec] | None = None
    """The scores read from the answer. Default for NAT: one score at `$.result.score`, named
    after `evaluator_name` (as NeMo Evaluator SDK names it)."""
    evaluator_name: str | None = None
    """NAT only: the evaluator the endpoint runs."""
    max_body_bytes: int = Field(default=1_048_576, ge=1, le=1 << 30)
    """Largest rendered request body, in bytes of JSON (default 1 MiB). It also bounds every
    value a template builds and its work (see gym_metrics/scorers/remote/_limits.py); going past it is
    a row error naming this limit, nothing is sent."""

    @pydantic.field_validator("body")
    @classmethod
    def _templates_compile(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            from gym_metrics.scorers.remote._template import BodyTemplate

            BodyTemplate(value)  # ValueError naming the value whose template does not compile
        return value

    @pydantic.model_validator(mode="after")
    def _by_type(self) -> RemoteScorerConfig:
        if self.type == REMOTE:
            if self.body is None:
                raise ValueError("type 'remote' needs 'body' (the request body template)")
            if not self.scores:
                raise ValueError("type 'remote' needs 'scores' (at least one)")
            if self.evaluator_name is not None:
                raise ValueError("'evaluator_name' is for type 'nemo-agent-toolkit-remote' only")
        else:
            if not self.evaluator_name:
                raise ValueError("type 'nemo-agent-toolkit-remote' needs 'evaluator_name'")
            if self.body is not None:
                raise ValueError("type 'nemo-agent-toolkit-remote' sends {evaluator_name, item}: drop 'body'")
        specs = self.score_specs()
        names = [s.name for s in specs]
        flags = {f"{s.name}_out_of_range" for s in specs if s.bounded}
        dupes = sorted({n for n in names if names.count(n) > 1} | (flags & set(names)))
        if dupes:
            raise ValueError(f"score names must be unique (including <name>_out_of_range flags): {', '.join(dupes)}")
        return self

    def score_specs(self) -> list[ScoreSpec]:
        """The scores read from each answer: `scores`, or for NAT without them one score at
        `$.result.score` named exactly `evaluator_name` (any text, as in the SDK: it is not
        held to the `scores[*].name` pattern)."""
        if self.scores:
            return list(self.scores)
        if self.type == NAT and self.evaluator_name:
            return [ScoreSpec.model_construct(name=self.evaluator_name, parser=ParserSpec(json_path=NAT_SCORE_PATH))]
        return []

    def score_names(self) -> tuple[str, ...]:
        """The scores a row gets, in order: every score, then the out-of-range flags."""
        specs = self.score_specs()
        return (*(s.name for s in specs), *(f"{s.name}_out_of_range" for s in specs if s.bounded))


class NatRemoteConfig(RemoteScorerConfig):
    """The same fields, with `type` defaulting to (and fixed at) `nemo-agent-toolkit-remote`."""

    type: Literal["nemo-agent-toolkit-remote"] = NAT
