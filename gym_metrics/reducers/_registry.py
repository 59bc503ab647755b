"""Reward reducers by name: `@register_reducer`, parametrised families (`pass@{k}`) and the
`gym_metrics.reducers` entry points (the built-ins' too, see pyproject.toml; plugins of the
group's old name are found as well, with a DeprecationWarning)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from gym_metrics._util.registry import Registry
from gym_metrics.reducers._base import Reducer

ENTRY_POINT_GROUP = "gym_metrics.reducers"
REDUCERS: Registry[Reducer] = Registry("reducer", Reducer, (ENTRY_POINT_GROUP,), named=True, families=True)
M = TypeVar("M", bound=type[Reducer])


def register_reducer(name: str) -> Callable[[M], M]:
    """Class decorator: make a Reducer subclass available as `get_reducer(name)`.

    A name holding `{k}` registers a family: the class has a `k: ClassVar[int]` and
    `get_reducer("pass@5")` returns an instance of a subclass with k = 5 and name "pass@5"
    (any k >= 1). Registering a name again replaces the earlier class.
    """
    return REDUCERS.register(name)


def get_reducer(name: str) -> Reducer:
    """An instance of the reducer registered as `name` (or of the family matching it).

    Raises NotFoundError listing the known names and families.
    """
    return REDUCERS.get(name)()


def reducer_names() -> list[str]:
    """Every name and family pattern `get_reducer` accepts, plugins included (not loaded)."""
    return REDUCERS.names()


def resolve_reducers(names: Iterable[str]) -> dict[str, Reducer]:
    """Instances for these names, duplicates removed, in order; fails on the first unknown."""
    return {name: get_reducer(name) for name in dict.fromkeys(names)}
