"""Find reward reducers by name: `@register_reducer`, parametrised families (`pass@{k}`) and
the `gym_metrics.reducers` entry points of separately installed packages (and those of the
group's first name, `gym_metrics.metrics`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import TypeVar

from gym_metrics.errors import NotFoundError
from gym_metrics.reducers._base import Reducer

ENTRY_POINT_GROUP = "gym_metrics.reducers"
OLD_ENTRY_POINT_GROUP = "gym_metrics.metrics"
"""Read too: plugins written before reducers were called reducers declare this group."""
K = "{k}"
"""Placeholder of a family's parameter: `@register_reducer("pass@{k}")` serves pass@1, pass@2, ..."""

M = TypeVar("M", bound=type[Reducer])


@dataclass(frozen=True)
class _Family:
    pattern: str
    regex: re.Pattern[str]
    cls: type[Reducer]


_REDUCERS: dict[str, type[Reducer]] = {}
_FAMILIES: dict[str, _Family] = {}
_LOADED_ENTRY_POINTS: set[str] = set()


def register_reducer(name: str) -> Callable[[M], M]:
    """Class decorator: make a Reducer subclass available as `get_reducer(name)`.

    A name holding `{k}` registers a family: the class has a `k: ClassVar[int]` and
    `get_reducer("pass@5")` returns an instance of a subclass with k = 5 and name "pass@5"
    (any k >= 1). Registering a name again replaces the earlier class.
    """

    def deco(cls: M) -> M:
        if not (isinstance(cls, type) and issubclass(cls, Reducer)):
            raise TypeError(f"@register_reducer({name!r}) needs a Reducer subclass, got {cls!r}")
        if not name or name != name.strip():
            raise ValueError(f"bad reducer name {name!r}")
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
            _REDUCERS[name] = cls
        return cls

    return deco


def get_reducer(name: str) -> Reducer:
    """An instance of the reducer registered as `name` (or of the family matching it).

    Raises NotFoundError listing the known names and families.
    """
    found = _lookup(name)
    if found is None:
        broken = _load_entry_points(name)
        found = _lookup(name)
        if found is None:
            note = f" (plugins that failed to load: {'; '.join(broken)})" if broken else ""
            raise NotFoundError(f"unknown reducer {name!r}; known: {', '.join(reducer_names())}{note}")
    return found()


def reducer_names() -> list[str]:
    """Every name and family pattern `get_reducer` accepts, plugins included (not loaded)."""
    names = set(_REDUCERS) | set(_FAMILIES)
    names.update(ep.name for ep in _entry_points())
    return sorted(names)


def resolve_reducers(names: Iterable[str]) -> dict[str, Reducer]:
    """Instances for these names, duplicates removed, in order; fails on the first unknown."""
    return {name: get_reducer(name) for name in dict.fromkeys(names)}


def _lookup(name: str) -> type[Reducer] | None:
    if name in _REDUCERS:
        return _REDUCERS[name]
    for family in _FAMILIES.values():
        match = family.regex.fullmatch(name)
        if match:
            # a class is hashable; mypy checks type[Reducer] against Hashable with Reducer.__hash__
            return _specialise(family.cls, family.pattern, int(match.group(1)))  # type: ignore[arg-type]
    return None


@lru_cache(maxsize=None)
def _specialise(cls: type[Reducer], pattern: str, k: int) -> type[Reducer]:
    """The family member for one k: a subclass whose ClassVars name and k are fixed, so an
    instance needs no configuration."""
    name = pattern.replace(K, str(k))
    return type(cls.__name__ + f"_{k}", (cls,), {"name": name, "k": k, "__module__": cls.__module__})


def _entry_points() -> list[EntryPoint]:
    return [*entry_points(group=ENTRY_POINT_GROUP), *entry_points(group=OLD_ENTRY_POINT_GROUP)]


def _load_entry_points(name: str) -> list[str]:
    """Load the plugins that could provide `name`: the entry point of that name (or of a
    matching family pattern) first, then, if still unknown, every other one. Returns why
    unrelated plugins failed to load; the one named `name` failing is an error at once.

    An entry point names either a Reducer subclass (registered under the entry point's name)
    or a module that registers its reducers with @register_reducer when imported.
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
        raise NotFoundError(f"reducer plugin {ep.name!r} ({ep.value}) failed to load: {exc!r}") from exc
    if isinstance(obj, type) and issubclass(obj, Reducer):
        register_reducer(ep.name)(obj)
    elif not isinstance(obj, ModuleType):
        raise NotFoundError(f"reducer plugin {ep.name!r} ({ep.value}) is neither a Reducer subclass nor a module")


def _family_regex(pattern: str) -> re.Pattern[str]:
    """`pass@{k}` -> a regex matching pass@1, pass@2, ... with k as group 1."""
    prefix, _, suffix = pattern.partition(K)
    return re.compile(re.escape(prefix) + r"([1-9][0-9]*)" + re.escape(suffix))
