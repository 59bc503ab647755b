"""What a scorer is: one dataset row in, one or more named scores out (NeMo Evaluator's
"metric" shape).

A scorer declares its score names and a pydantic config model (what `--scorer-config`
holds), and implements `score(row)`. A row it cannot score raises RowError naming the field;
`evaluate` records that on the row and counts it as NaN, and never aborts the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pydantic

from gym_metrics.errors import GymMetricsError


class RowError(GymMetricsError):
    """This row cannot be scored: `field` says where, the message says why."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field, self.reason = field, reason


class NoConfig(pydantic.BaseModel):
    """For scorers without options: any key is an error."""

    model_config = pydantic.ConfigDict(extra="forbid")


class Scorer:
    """Base class of scorers (NeMo Evaluator calls them metrics; `RowMetric` is this class
    under that name). Subclasses set `name`, `score_names`, optionally `Config`,
    and implement `score`."""

    name: ClassVar[str] = ""
    score_names: ClassVar[tuple[str, ...]] = ()
    """The scores `score` returns, in output order (e.g. ("tool_call_accuracy",))."""
    higher_is_better: ClassVar[bool] = True
    Config: ClassVar[type[pydantic.BaseModel]] = NoConfig
    eager: ClassVar[bool] = False
    """True when `score` never depends on its asyncio task's identity (pure CPU work): before
    Python 3.12 rows are then scored without a Task each (see gym_metrics/_eager.py)."""

    def __init__(self, config: pydantic.BaseModel | Mapping[str, Any] | None = None) -> None:
        if config is None or isinstance(config, Mapping):
            config = self.Config.model_validate(dict(config or {}))
        self.config = config

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        """Scores of one row, keyed by `score_names` (NaN allowed). Raise RowError for a row
        that cannot be scored."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release resources (HTTP clients); called once by `evaluate` at the end."""
