"""What a scorer is, and scorers by name: one dataset row in, one or more named scores out
(NeMo Evaluator's "metric" shape).

A scorer declares its score names and a pydantic config model (what `--scorer-config`
holds), and implements `score(row)`. A row it cannot score raises RowError naming the field;
`evaluate` records that on the row and counts it as NaN, and never aborts the run. Scorers are
found by name in the `gym_metrics.scorers` entry-point group (the built-ins too: see
pyproject.toml) or registered with `@register_scorer`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import pydantic

from gym_metrics._util.registry import Registry
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError


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
    Python 3.12 rows are then scored without a Task each (see gym_metrics/_util/eager.py)."""

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


ENTRY_POINT_GROUP = "gym_metrics.scorers"
SCORERS: Registry[Scorer] = Registry("scorer", Scorer, (ENTRY_POINT_GROUP,), named=True)
S = TypeVar("S", bound=type[Scorer])


def register_scorer(name: str) -> Callable[[S], S]:
    """Class decorator: make a Scorer usable as `get_scorer(name)` and `evaluate --scorer NAME`."""
    return SCORERS.register(name)


def scorer_names() -> list[str]:
    """Every name `get_scorer` accepts, plugins included (not loaded)."""
    return SCORERS.names()


def get_scorer(name: str, config: Mapping[str, Any] | None = None) -> Scorer:
    """An instance of the named scorer with `config` validated by its Config model."""
    cls = SCORERS.get(name)
    try:
        return cls(config)
    except pydantic.ValidationError as exc:
        violations = [
            FieldViolation(".".join(str(p) for p in ("config", *e["loc"])), e["msg"]) for e in exc.errors()
        ]
        raise InvalidInputError(f"invalid config for {name!r}", violations) from None
