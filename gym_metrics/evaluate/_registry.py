"""Row metrics by name: `@register_row_metric` and the `gym_metrics.row_metrics` entry points."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import Any, TypeVar

import pydantic

from gym_metrics.errors import FieldViolation, InvalidInputError, NotFoundError
from gym_metrics.evaluate._base import RowMetric

ENTRY_POINT_GROUP = "gym_metrics.row_metrics"
_ROW_METRICS: dict[str, type[RowMetric]] = {}
M = TypeVar("M", bound=type[RowMetric])


def register_row_metric(name: str) -> Callable[[M], M]:
    """Class decorator: make a RowMetric usable as `evaluate --metric NAME`."""

    def deco(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, RowMetric)):
            raise TypeError(f"@register_row_metric({name!r}) needs a RowMetric subclass, got {cls!r}")
        cls.name = name
        _ROW_METRICS[name] = cls
        return cls

    return deco


def row_metric_names() -> list[str]:
    _load_builtins()
    return sorted({*_ROW_METRICS, *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})


def get_row_metric(name: str, config: Mapping[str, Any] | None = None) -> RowMetric:
    """An instance of the named metric with `config` validated by its Config model."""
    _load_builtins()
    cls = _ROW_METRICS.get(name)
    if cls is None:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name == name:
                cls = ep.load()
                break
    if cls is None:
        raise NotFoundError(f"unknown row metric {name!r}; known: {', '.join(row_metric_names())}")
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


_BUILTIN_MODULES: list[str] = ["gym_metrics.agentic._metrics", "gym_metrics.judge._metrics", "gym_metrics.remote._metric"]
"""Modules defining built-in row metrics (their imports register them)."""
