"""Skip without an optional extra, except under CI=true, where a missing extra fails."""

from __future__ import annotations

from types import ModuleType

from _ci import need_module


_INSTALL = {
    "prometheus_client": "pip install -e '.[dev]' (or the prometheus extra)",
    "opentelemetry.sdk": "pip install opentelemetry-sdk (the mlflow extra brings it too)",
}


def need(module: str) -> ModuleType:
    """The module; skip (fail under CI=true, tests/_ci.py) when it is not installed, with a
    hint that installs it."""
    return need_module(module, _INSTALL[module])
