"""reasoning-gym itself, imported on first use: its datasets by name, their config classes, and
a config given as JSON turned into the values its dataclass holds.

The import takes about 1.5 s and brings sympy, so nothing imports it at load time; a missing
package is one error that says which extra to install.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import functools
import importlib.metadata
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from gym_metrics.errors import ExitCode, FieldViolation, GymMetricsError, InvalidInputError

DISTRIBUTION = "reasoning-gym"
INSTALL_HINT = "pip install 'gym-metrics[reasoning-gym]'"
COMPOSITE = "composite"
"""reasoning-gym's own mixing dataset: a mix is asked for with --mix, not by this name."""


class ReasoningGymMissingError(GymMetricsError):
    """reasoning-gym is not installed (the `reasoning-gym` extra)."""

    exit_code = ExitCode.BAD_INPUT


@functools.lru_cache(maxsize=1)
def library() -> ModuleType:
    """The `reasoning_gym` package, imported once; ReasoningGymMissingError when absent."""
    try:
        import reasoning_gym
    except ImportError as exc:
        if exc.name is not None and exc.name.split(".")[0] != "reasoning_gym":
            raise  # installed, but one of its own imports is broken: say that, not "missing"
        raise ReasoningGymMissingError(f"reasoning-gym is not installed: {INSTALL_HINT}") from None
    return reasoning_gym


def version() -> str:
    """The installed reasoning-gym's version (its distribution's, not its stale `__version__`)."""
    library()
    return importlib.metadata.version(DISTRIBUTION)


def dataset_names() -> list[str]:
    """Every dataset reasoning-gym registers, sorted (its mixing dataset left out)."""
    library()
    from reasoning_gym.factory import DATASETS

    return sorted(name for name in DATASETS if name != COMPOSITE)


def system_prompts() -> dict[str, str]:
    """reasoning-gym's system prompts by name (`default` is the one its evaluation sends)."""
    library()
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return dict(SYSTEM_PROMPTS)


def unknown_dataset(name: str, field: str) -> InvalidInputError:
    """The error for a name reasoning-gym does not register, with the closest names."""
    import difflib

    names = dataset_names()
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"did you mean {', '.join(close)}?" if close else f"reasoning-gym {version()} has {len(names)}: `gym-metrics dataset reasoning-gym --list`"
    why = "a mix is given with --mix NAME:WEIGHT" if name == COMPOSITE else hint
    return InvalidInputError(f"unknown reasoning-gym dataset {name!r}", [FieldViolation(field, why)])


def dataset_kwargs(name: str, config: Mapping[str, Any], name_field: str, config_field: str) -> dict[str, Any]:
    """`config` (JSON values) as create_dataset's keyword arguments for dataset `name`: each key
    checked against the dataset's config class and its value turned into the kind that class
    holds (a list where it holds a tuple, a string where it holds an enum or a date, an object
    where it holds a dataclass), so a config read back from a row builds the same dataset as the
    Python values did. `seed` and `size` are given apart, never here."""
    library()
    from reasoning_gym.factory import DATASETS

    if name not in DATASETS or name == COMPOSITE:
        raise unknown_dataset(name, name_field)
    fields = {f.name: f for f in dataclasses.fields(DATASETS[name][1])}
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key in ("seed", "size"):
            raise InvalidInputError(f"{name}: `{key}` is set apart", [FieldViolation(f"{config_field}.{key}", "give it as the dataset's own seed / size")])
        spec = fields.get(key)
        if spec is None:
            known = ", ".join(sorted(set(fields) - {"seed", "size"}))
            raise InvalidInputError(f"{name} has no setting {key!r}", [FieldViolation(f"{config_field}.{key}", f"its settings: {known}")])
        try:
            out[key] = _like(_default(spec), value)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(f"{name}: bad {key}", [FieldViolation(f"{config_field}.{key}", str(exc))]) from None
    return out


def _default(spec: dataclasses.Field[Any]) -> Any:
    if spec.default is not dataclasses.MISSING:
        return spec.default
    if spec.default_factory is not dataclasses.MISSING:
        return spec.default_factory()
    return None


def _like(default: Any, value: Any) -> Any:
    """`value` as the kind of `default`: JSON has no tuples, enums, dates or dataclasses."""
    if isinstance(default, tuple) and isinstance(value, list):
        inner = default[0] if default else None
        return tuple(_like(inner, v) for v in value)
    if isinstance(default, list) and isinstance(value, list) and default:
        return [_like(default[0], v) for v in value]
    if isinstance(default, enum.Enum) and not isinstance(value, enum.Enum):
        return type(default)(value)
    if isinstance(default, (datetime.date, datetime.time)) and isinstance(value, str):
        return type(default).fromisoformat(value)
    if dataclasses.is_dataclass(default) and not isinstance(default, type) and isinstance(value, Mapping):
        return type(default)(**value)
    return value


__all__ = [
    "COMPOSITE",
    "INSTALL_HINT",
    "ReasoningGymMissingError",
    "dataset_kwargs",
    "dataset_names",
    "library",
    "system_prompts",
    "unknown_dataset",
    "version",
]
