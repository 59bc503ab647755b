"""NeMo Gym's sandbox providers by name (`create_provider({name: options})`): `local`, run in
gym-metrics' sandbox (_local.py), and any registered with `register_provider`. NeMo Gym's
container and service providers (docker, apptainer, opensandbox, ...) are not ported: naming one
is an error that says so, raised where NeMo Gym would fail to reach it (a lazily made sandbox:
its first use)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gym_metrics.nemo_gym.sandbox._local import LocalProvider

_REGISTERED: dict[str, type] = {"local": LocalProvider}
NOT_PORTED = ("apptainer", "daytona", "docker", "e2b", "ecs_fargate", "enroot", "opensandbox", "openshell")
"""NeMo Gym 0.7.0's other providers."""


def register_provider(name: str, provider_class: type, *, override: bool = False) -> None:
    """Make `provider_class` (NeMo Gym's provider protocol: create, exec, upload_file,
    download_file, status, close, aclose) known as `name`."""
    if not name:
        raise ValueError("Provider name must be non-empty")
    if name in _REGISTERED and not override:
        raise ValueError(f"Sandbox provider {name!r} is already registered")
    _REGISTERED[name] = provider_class


def list_providers() -> list[str]:
    return sorted(_REGISTERED)


def get_provider_class(name: str) -> type:
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in NOT_PORTED:
        raise ValueError(
            f"Sandbox provider {name!r} is NeMo Gym's and not ported to gym-metrics; available providers: "
            f"{', '.join(list_providers())} ('local' runs each sandbox in gym-metrics' own, isolated sandbox: "
            "sandbox_provider: {local: {}}), or register_provider one of your own"
        )
    raise ValueError(f"Unknown sandbox provider {name!r}. Available providers: {', '.join(list_providers())}")


def create_provider(config: Mapping[str, Any]) -> Any:
    """The provider of a single-key config `{name: options}` (options None: none)."""
    if len(config) != 1:
        raise ValueError("Sandbox provider config must contain exactly one provider name")
    name, options = next(iter(config.items()))
    if not isinstance(name, str) or not name:
        raise ValueError("Sandbox provider name must be a non-empty string")
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise TypeError(f"Sandbox provider {name!r} config must be a mapping")
    return get_provider_class(name)(**dict(options))
