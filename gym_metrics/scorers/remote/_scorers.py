"""The `remote` and `nemo-agent-toolkit-remote` row metrics."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, ClassVar

from gym_metrics._util.http import SNIPPET
from gym_metrics._util.masking import without_url_credentials
from gym_metrics.scorers import RowError, Scorer, register_scorer
from gym_metrics.scorers.remote._config import NAT, NatRemoteConfig, RemoteScorerConfig
from gym_metrics.scorers.remote._http import RemoteClient
from gym_metrics.scorers.remote._scores import read_score
from gym_metrics.scorers.remote._template import BodyTemplate


@register_scorer("remote")
class RemoteScorer(Scorer):
    """Each row POSTed to the configured endpoint; scores read from its JSON answer.

    The config's `type` picks the request format (`remote`: the rendered `body`;
    `nemo-agent-toolkit-remote`: `{"evaluator_name", "item": row}`). The score names come
    from the config: every score, then `<name>_out_of_range` (1.0/0.0) for each score with a
    minimum or maximum. Out-of-range values are kept, not clipped.
    """

    Config: ClassVar[type[RemoteScorerConfig]] = RemoteScorerConfig
    config: RemoteScorerConfig
    eager = False  # httpx: its cancel scopes need a real task per row

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        cfg = self.config
        self.score_names = cfg.score_names()  # type: ignore[misc]  # per instance: from the config
        self._specs = cfg.score_specs()
        self._template = BodyTemplate(cfg.body, cfg.max_body_bytes) if cfg.body is not None else None
        self._client = RemoteClient(cfg)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(type={self.config.type!r}, url={without_url_credentials(self.config.url)!r})"

    @property
    def attempts(self) -> int:
        """HTTP attempts made so far (for tests and diagnostics)."""
        return self._client.attempts

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        cfg = self.config
        if cfg.type == NAT:
            body: Any = {"evaluator_name": cfg.evaluator_name, "item": dict(row)}
        else:
            assert self._template is not None
            body = self._template.render(row)
        answer = await self._client.post_row(body)
        if cfg.type == NAT and isinstance(answer, Mapping) and answer.get("success") is False:
            error = answer.get("error") or "no error message"
            raise RowError("endpoint", f"evaluator {cfg.evaluator_name!r} failed: {self._client.scrub(str(error), SNIPPET)}")
        scores: dict[str, float] = {}
        flags: dict[str, float] = {}
        for spec in self._specs:
            value = read_score(answer, spec.name, spec.parser.json_path)
            scores[spec.name] = value
            if spec.bounded:
                low = spec.minimum if spec.minimum is not None else -math.inf
                high = spec.maximum if spec.maximum is not None else math.inf
                flags[f"{spec.name}_out_of_range"] = math.nan if math.isnan(value) else float(not low <= value <= high)
        return {**scores, **flags}

    async def aclose(self) -> None:
        await self._client.aclose()


@register_scorer(NAT)
class NatRemoteScorer(RemoteScorer):
    """A NeMo Agent Toolkit evaluate-item endpoint: POST `{"evaluator_name", "item": row}`,
    score `$.result.score` named after the evaluator; `success: false` is a row error carrying
    the endpoint's error (so the row's score is NaN)."""

    Config = NatRemoteConfig
