"""A row scorer served as an environment: `verify` scores the rollout's row with a Scorer.

The verify body is the row (its fields as sent, extra fields allowed when the request model
allows them); the response carries every score as a field, and the reward is one of them
(`reward_score`, else the scorer's first). A RowError on the scorer's backend (an HTTP
failure, an unreadable answer) is re-raised, so that rollout alone is recorded as failed; any
other RowError is the rollout's data and answers INVALID_ARGUMENT naming the field.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Mapping
from typing import Any, ClassVar

from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError
from gym_metrics.models import BaseVerifyRequest, BaseVerifyResponse
from gym_metrics.scorers import RowError, Scorer
from gym_metrics.environments._server import SimpleResourcesServer


class ScorerEnvironment(SimpleResourcesServer):
    """Base class of environments that score each rollout with one Scorer.

    A subclass names its request and response models in `verify`'s annotations (a two-line
    override calling `score_rollout`), picks the reward with `reward_score`, and may override
    `load_scorer` (configuration read when the environment is created, so a bad config fails
    at `serve`), `build_row` (request -> the scorer's row) and `reward` (a fallback rule).
    """

    reward_score: ClassVar[str | None] = None
    """The score that is the reward; None: the scorer's first score."""
    label_field: ClassVar[str | None] = None
    """A response field given the scorer's label (e.g. "metric"), or None."""
    backend_failures: ClassVar[tuple[str, ...]] = ()
    """fnmatch patterns of RowError fields meaning the scorer's backend failed, not the
    rollout's data: re-raised, so the rollout is recorded as failed with the reason."""
    violation_prefix: ClassVar[str] = "body_json."
    """Put before a RowError's field in the INVALID_ARGUMENT violation."""
    invalid_message: ClassVar[str] = "{label}: rollout cannot be scored"
    no_reward_field: ClassVar[str] = "score"
    """The RowError field when the reward score is missing or not finite."""
    no_reward_message: ClassVar[str] = "{label} gave no {score} score"
    not_configured: ClassVar[str] = "{name} is not configured"
    """The error of a verify with no scorer configured."""
    declare_scores: ClassVar[bool] = True
    """Declare every score in GetServerInfo's verify response schema (as a number), so
    `gym-metrics evaluate --server` reports each of them, not only the reward."""
    rename_hint: ClassVar[str] = ""
    """Appended to the error for a score named like a field of the verify response."""

    def __init__(self, scorer: Scorer | None = None) -> None:
        self.scorer = scorer if scorer is not None else self.load_scorer()
        if self.scorer is not None:
            self._check_score_names(self.scorer)

    @property
    def metric(self) -> Scorer | None:
        """The scorer, under NeMo Evaluator's word for it."""
        return self.scorer

    @metric.setter
    def metric(self, scorer: Scorer | None) -> None:
        self.scorer = scorer

    def load_scorer(self) -> Scorer | None:
        """The scorer when none is given (e.g. from environment variables); None: unset."""
        return None

    def scorer_label(self, scorer: Scorer) -> str:
        """How messages and `label_field` name the scorer (default: its registry name)."""
        return scorer.name

    def build_row(self, body: BaseVerifyRequest) -> dict[str, Any]:
        """The scorer's row: the request's fields."""
        return body.model_dump()

    def reward(self, scorer: Scorer, scores: Mapping[str, float]) -> float:
        """The `reward_score` (default: the first score); RowError when missing or not finite."""
        main = self.reward_score or scorer.score_names[0]
        value = float(scores.get(main, math.nan))
        if not math.isfinite(value):
            label = self.scorer_label(scorer)
            raise RowError(self.no_reward_field, self.no_reward_message.format(label=label, score=main))
        return value

    async def score_rollout(self, body: BaseVerifyRequest) -> Any:
        """What `verify` returns: score the row, pick the reward, build the response model."""
        scorer = self.scorer
        if scorer is None:
            raise GymMetricsError(self.not_configured.format(name=self.server_name()))
        try:
            scores = await scorer.score(self.build_row(body))
        except RowError as exc:
            if any(fnmatch.fnmatchcase(exc.field, pattern) for pattern in self.backend_failures):
                raise
            message = self.invalid_message.format(label=self.scorer_label(scorer))
            raise InvalidInputError(message, [FieldViolation(self.violation_prefix + exc.field, exc.reason)]) from None
        reward = self.reward(scorer, scores)
        fields: dict[str, Any] = {name: float(scores[name]) for name in scorer.score_names if name in scores}
        if self.label_field is not None:
            fields[self.label_field] = self.scorer_label(scorer)
        return self.verify_response_model()(reward=reward, **fields)

    def server_info(self) -> dict[str, Any]:
        info = super().server_info()
        if self.declare_scores and self.scorer is not None:
            properties = info["verify_response_schema"].setdefault("properties", {})
            for name in self.scorer.score_names:
                properties.setdefault(name, {"type": "number", "title": name})
        return info

    def _check_score_names(self, scorer: Scorer) -> None:
        """A score may not overwrite a field of the response itself (reward, the label)."""
        own = set(BaseVerifyResponse.model_fields) | ({self.label_field} if self.label_field else set())
        taken = sorted(set(scorer.score_names) & own)
        if taken:  # e.g. a NAT evaluator named "reward"
            raise InvalidInputError(
                f"{self.server_name()}: score name {taken[0]!r} is a field of the verify response itself; "
                f"rename the score{self.rename_hint}"
            )
