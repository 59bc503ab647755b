"""Every old name that still works, in one table: each warns once per use with a
DeprecationWarning naming its replacement and the release that removes it.

Old names resolve by import path (importlib), so an alias never adds an import edge from a
package to one above it."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

REMOVAL = "0.3.0"
"""The release that removes every name below."""

OLD_MODULES: dict[str, str] = {
    "gym_metrics.server": "gym_metrics.environments",
}
"""Old module -> the module to use instead (the old module re-exports it and warns on import)."""

OLD_NAMES: dict[str, dict[str, str]] = {
    "gym_metrics.scorers": {
        "ScorerEnvironment": "gym_metrics.environments:ScorerEnvironment",
    },
    "gym_metrics.testing": {
        "ScorerEnvironment": "gym_metrics.environments:ScorerEnvironment",
    },
}
"""Package -> old attribute name -> `module:name` of its replacement."""


def warn(old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(f"{old} is deprecated; use {new} (removal in {REMOVAL})", DeprecationWarning, stacklevel=stacklevel)


def warn_module(module: str) -> None:
    """Called at the top of an old module: the warning points at the importing line."""
    warn(module, OLD_MODULES[module], stacklevel=4)


def old_name(package: str, name: str) -> Any:
    """A package's `__getattr__` for its old names: the replacement, with a warning."""
    target = OLD_NAMES.get(package, {}).get(name)
    if target is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, _, attribute = target.partition(":")
    warn(f"{package}.{name}", f"{module}.{attribute}")
    return getattr(importlib.import_module(module), attribute)


__all__ = ["OLD_MODULES", "OLD_NAMES", "REMOVAL", "old_name", "warn", "warn_module"]
