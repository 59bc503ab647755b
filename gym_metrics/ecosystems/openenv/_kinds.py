"""What an OpenEnv environment class is, read off the class itself so nothing here imports
OpenEnv: whether a class is one (it subclasses OpenEnv's `Environment`), whether it speaks MCP
(`MCPEnvironment`: its actions are tool calls), and the Action model its `step` takes.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

import pydantic

from gym_metrics.errors import InvalidInputError

INSTALL_HINT = "pip install 'gym-metrics[openenv]'"


def _openenv_base(cls: type, name: str) -> type | None:
    """The class called `name` from OpenEnv's own package in `cls`'s bases (None: not one)."""
    for base in inspect.getmro(cls):
        if base.__name__ == name and base.__module__.split(".")[0] in ("openenv", "openenv_core"):
            return base
    return None


def is_openenv_environment(obj: object) -> bool:
    """True for a subclass of OpenEnv's `Environment` (the class, not an instance)."""
    return isinstance(obj, type) and _openenv_base(obj, "Environment") is not None and obj.__name__ != "Environment"


def is_mcp(cls: type) -> bool:
    """True for OpenEnv's MCP environments: their actions are calls of the tools they list."""
    return _openenv_base(cls, "MCPEnvironment") is not None


def overrides(cls: type, method: str) -> bool:
    """Whether `cls` defines `method` itself rather than inheriting OpenEnv's default (the test
    OpenEnv's server makes to pick `step_async` over `step` in a thread)."""
    base = _openenv_base(cls, "Environment")
    return base is not None and getattr(cls, method, None) is not getattr(base, method, None)


def action_type(cls: type) -> type[pydantic.BaseModel]:
    """The Action model `cls.step` takes: its `action` annotation, else the first type argument
    of its `Environment[Action, Observation, State]` base. InvalidInputError when neither names a
    model (the environment must say what its actions are)."""
    found: Any = None
    try:
        found = typing.get_type_hints(getattr(cls, "step")).get("action")
    except Exception:  # an annotation that does not resolve: try the generic base
        found = None
    if not _a_model(found):
        found = next((typing.get_args(b)[0] for b in _generic_bases(cls) if typing.get_args(b)), None)
    if not _a_model(found):
        raise InvalidInputError(
            f"{cls.__name__}: cannot tell its Action class; annotate step(self, action: MyAction) "
            "or subclass Environment[MyAction, MyObservation, MyState]"
        )
    return typing.cast(type[pydantic.BaseModel], found)


def _generic_bases(cls: type) -> list[Any]:
    return [b for c in inspect.getmro(cls) for b in getattr(c, "__orig_bases__", ())]


def _a_model(value: Any) -> bool:
    """A concrete Action model: a pydantic model class other than OpenEnv's own `Action` base."""
    return (
        isinstance(value, type) and issubclass(value, pydantic.BaseModel)
        and not (value.__name__ == "Action" and value.__module__.split(".")[0] == "openenv")
    )  # fmt: skip


__all__ = ["INSTALL_HINT", "action_type", "is_mcp", "is_openenv_environment", "overrides"]
