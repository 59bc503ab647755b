"""The framework's calls into an environment (`open_session`, `route_tool_call`, `tools`, ...),
never shadowed by an environment's own method of the same name.

A ported NeMo Gym environment subclasses gym-metrics' port of NeMo Gym's
`SimpleResourcesServer`, which implements these hooks; the environment's own methods may share
a hook's name, being its FastAPI routes (indirect_prompt_injection's
`route_tool_call(tool_name, body, request)`, math_with_code's `end_session(request)`), and plain
attribute lookup would call those. A class that sets `_gm_pins_hooks = True` in its own body
takes its hooks from itself and its bases only: the classes below it in the MRO (the ported
environment's) are skipped for a hook's name. Elsewhere a hook is the instance's attribute.
"""

from __future__ import annotations

from typing import Any


def hook(env: Any, name: str) -> Any:
    """The bound method gym-metrics calls as `env.<name>` (see the module docstring)."""
    cls = type(env)
    pinned = _PINNED.get(cls, _UNKNOWN)
    if pinned is _UNKNOWN:
        pinned = _PINNED[cls] = _pinning(cls)
    if pinned is None:
        return getattr(env, name)
    function = pinned.get(name)
    if function is None:
        function = pinned[name] = _function(cls, name)
    return function.__get__(env, cls)


_UNKNOWN: Any = object()
_PINNED: dict[type, dict[str, Any] | None] = {}
"""Per class: None when no class of its MRO pins hooks, else its hooks' functions found so far."""


def _pinning(cls: type) -> dict[str, Any] | None:
    return {} if any(vars(klass).get("_gm_pins_hooks") for klass in cls.__mro__) else None


def _function(cls: type, name: str) -> Any:
    """The hook's function from the first class of the MRO that pins hooks, or from above it."""
    mro = cls.__mro__
    start = next(i for i, klass in enumerate(mro) if vars(klass).get("_gm_pins_hooks"))
    for klass in mro[start:]:
        if name in vars(klass):
            return vars(klass)[name]
    raise AttributeError(f"{cls.__name__} has no hook {name!r}")


__all__ = ["hook"]
