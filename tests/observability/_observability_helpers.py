"""Skip without an optional extra, except under CI=true, where a missing extra fails."""

from __future__ import annotations

from types import ModuleType

from _ci import need_module


def need(module: str) -> ModuleType:
    """The module; skip (fail under CI=true, tests/_ci.py) when its extra is not installed."""
    return need_module(module, "pip install -e '.[dev]'")
