"""Find reward reducers by name: `@register_metric`, parametrised families (`pass@{k}`) and
the `gym_metrics.metrics` entry points of separately installed packages."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import TypeVar

from gym_metrics.errors import NotFoundError
from gym_metrics.metrics._base import Metric

ENTRY_POINT_GROUP = "gym_metrics.metrics"
K = "{k}"
"""Placeholder of a family's parameter: `@register_metric("pass@{k}")` serves pass@1, pass@2, ..."""

M = TypeVar("M", bound=type[Metric])


@dataclass(frozen=True)
class _Family:
    pattern: str
    regex: re.Pattern[str]
    cls: type[Metric]


_METRICS: dict[str, type[Metric]] = {}
_FAMILIES: dict[str, _Family] = {}
_LOADED_ENTRY_POINTS: set[str] = set()


def register_metric(name: str) -> Callable[[M], M]:
    """Class decorator: make a Metric subclass available as `get_metric(name)`.

    A name holding `{k}` registers a family: the class has a `k: ClassVar[int]` and
    `get_metric("pass@5")` returns an instance of a subclass with k = 5 and name "pass@5"
    (any k >= 1). Registering a name again replaces the earlier class.
    """

    def deco(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, Metric)):
            raise TypeError(f"@register_metric({name!r}) needs a Metric subclass, got {cls!r}")
        if not name or name != name.strip():
            raise ValueError(f"bad metric name {name!r}")
        own = cls.__dict__.get("name")
        if own and own != name:
            raise ValueError(f"{cls.__name__}.name is {own!r} but it is registered as {name!r}")
        cls.name = name
        if K in name:
            if name.count(K) != 1:
                raise ValueError(f"a family name holds {K} once, got {name!r}")
            _FAMILIES[name] = _Family(name, _family_regex(name), cls)
            _specialise.cache_clear()
        else:
            _METRICS[name] = cls
        return cls

    return deco


def get_metric(name: str) -> Metric:
    """An instance of the metric registered as `name` (or of the family matching it).

    Raises NotFoundError listing the known names and families.
    """
    found = _lookup(name)
    if found is None:
        broken = _load_entry_points(name)
        found = _lookup(name)
        if found is None:
            note = f" (plugins that failed to load: {'; '.join(broken)})" if broken else ""
            raise NotFoundError(f"unknown metric {name!r}; known: {', '.join(registered_metrics())}{note}")
    return found()


def registered_metrics() -> list[str]:
    """Every name and family pattern `get_metric` accepts, plugins included (not loaded)."""
    names = set(_METRICS) | set(_FAMILIES)
    names.update(ep.name for ep in _entry_points())
    return sorted(names)


def resolve_metrics(names: Iterable[str]) -> dict[str, Metric]:
    """Instances for these names, duplicates removed, in order; fails on the first unknown."""
    return {name: get_metric(name) for name in dict.fromkeys(names)}


def _lookup(name: str) -> type[Metric] | None:
    if name in _METRICS:
        return _METRICS[name]
    for family in _FAMILIES.values():
        match = family.regex.fullmatch(name)
        if match:
            # a class is hashable; mypy checks type[Metric] against Hashable with Metric.__hash__
            return _specialise(family.cls, family.pattern, int(match.group(1)))  # type: ignore[arg-type]
    return None


@lru_cache(maxsize=None)
def _specialise(cls: type[Metric], pattern: str, k: int) -> type[Metric]:
    """The family member for one k: a subclass whose ClassVars name and k are fixed, so an
    instance needs no configuration."""
    name = pattern.replace(K, str(k))
    return type(cls.__name__ + f"_{k}", (cls,), {"name": name, "k": k, "__module__": cls.__module__})


def _entry_points() -> list[EntryPoint]:
    return list(entry_points(group=ENTRY_POINT_GROUP))


def _load_entry_points(name: str) -> list[str]:
    """Load the plugins that could provide `name`: the entry point of that name (or of a
    matching family pattern) first, then, if still unknown, every other one. Returns why
    unrelated plugins failed to load; the one named `name` failing is an error at once.

    An entry point names either a Metric subclass (registered under the entry point's name)
    or a module that registers its metrics with @register_metric when imported.
    """
    eps = [ep for ep in _entry_points() if ep.name not in _LOADED_ENTRY_POINTS]
    first = [ep for ep in eps if ep.name == name or (K in ep.name and _family_regex(ep.name).fullmatch(name))]
    for ep in first:
        _load(ep)
    broken = []
    if _lookup(name) is None:
        for ep in eps:
            if ep not in first:
                try:
                    _load(ep)
                except NotFoundError as exc:
                    broken.append(str(exc))
    return broken


def _load(ep: EntryPoint) -> None:
    _LOADED_ENTRY_POINTS.add(ep.name)
    try:
        obj = ep.load()
    except Exception as exc:
        raise NotFoundError(f"metric plugin {ep.name!r} ({ep.value}) failed to load: {exc!r}") from exc
    if isinstance(obj, type) and issubclass(obj, Metric):
        register_metric(ep.name)(obj)
    elif not isinstance(obj, ModuleType):
        raise NotFoundError(f"metric plugin {ep.name!r} ({ep.value}) is neither a Metric subclass nor a module")


def _family_regex(pattern: str) -> re.Pattern[str]:
    """`pass@{k}` -> a regex matching pass@1, pass@2, ... with k as group 1."""
    prefix, _, suffix = pattern.partition(K)
    return re.compile(re.escape(prefix) + r"([1-9][0-9]*)" + re.escape(suffix))
