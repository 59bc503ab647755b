"""Scorers by name: `@register_scorer` and the `gym_metrics.row_metrics` entry points."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any, TypeVar

import pydantic

from gym_metrics.errors import FieldViolation, InvalidInputError, NotFoundError
from gym_metrics.scorers._base import Scorer

ENTRY_POINT_GROUP = "gym_metrics.row_metrics"
_ROW_METRICS: dict[str, type[Scorer]] = {}
M = TypeVar("M", bound=type[Scorer])


def register_scorer(name: str) -> Callable[[M], M]:
    """Class decorator: make a Scorer usable as `evaluate --metric NAME`."""

    def deco(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, Scorer)):
            raise TypeError(f"@register_scorer({name!r}) needs a Scorer subclass, got {cls!r}")
        cls.name = name
        _ROW_METRICS[name] = cls
        return cls

    return deco


def scorer_names() -> list[str]:
    _load_builtins()
    return sorted({*_ROW_METRICS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def get_scorer(name: str, config: Mapping[str, Any] | None = None) -> Scorer:
    """An instance of the named metric with `config` validated by its Config model."""
    _load_builtins()
    cls = _ROW_METRICS.get(name)
    if cls is None:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name == name:
                cls = ep.load()
                break
    if cls is None:
        raise NotFoundError(f"unknown row metric {name!r}; known: {', '.join(scorer_names())}")
    try:
        return cls(config)
    except pydantic.ValidationError as exc:
        violations = [
            FieldViolation(".".join(str(p) for p in ("config", *e["loc"])), e["msg"]) for e in exc.errors()
        ]
        raise InvalidInputError(f"invalid config for {name!r}", violations) from None


def _load_builtins() -> None:
    """Import the modules whose decorators register the built-in row metrics."""
    import importlib

    for module in _BUILTIN_MODULES:
        importlib.import_module(module)


_BUILTIN_MODULES: list[str] = ["gym_metrics.scorers.tool_calls._scorers", "gym_metrics.scorers.judge._metrics", "gym_metrics.scorers.remote._scorers"]
"""Modules defining built-in row metrics (their imports register them)."""
