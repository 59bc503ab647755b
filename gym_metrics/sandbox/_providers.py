"""Sandbox providers by name: `local` (Pool, the default) and `docker` (DockerProvider), and
any a plugin registers (entry-point group `gym_metrics.sandbox_providers`, or
`@register_provider("name")`), chosen by `serve --sandbox-provider NAME --sandbox-option
KEY=VALUE` or GYM_METRICS_SANDBOX_PROVIDER / GYM_METRICS_SANDBOX_OPTIONS (a JSON object), which
the flags set for the server's workers."""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gym_metrics._util.registry import Registry
from gym_metrics.errors import InvalidInputError
from gym_metrics.sandbox._docker import DockerProvider
from gym_metrics.sandbox._pool import Pool
from gym_metrics.sandbox._provider import Provider

PROVIDER_ENV = "GYM_METRICS_SANDBOX_PROVIDER"
OPTIONS_ENV = "GYM_METRICS_SANDBOX_OPTIONS"
DEFAULT_PROVIDER = "local"
ENTRY_POINT_GROUP = "gym_metrics.sandbox_providers"

_PROTOCOL: Any = Provider
"""The base a provider class is checked against at registration: a protocol (`run`, `open`,
`aclose`), whatever the class's bases (mypy wants a concrete class where a type is given)."""
PROVIDERS: Registry[Provider] = Registry("sandbox provider", _PROTOCOL, (ENTRY_POINT_GROUP,))
PROVIDERS.add("local", Pool)
PROVIDERS.add("docker", DockerProvider)

P = TypeVar("P", bound=type)


def register_provider(name: str) -> Callable[[P], P]:
    """Class decorator: a provider class (`run`, `open`, `aclose`; see Provider) known as `name`."""
    return PROVIDERS.register(name)


def provider_names() -> list[str]:
    return PROVIDERS.names()


def make_provider(name: str | None = None, **options: Any) -> Provider:
    """The provider `name` (default: GYM_METRICS_SANDBOX_PROVIDER, else `local`), made with
    GYM_METRICS_SANDBOX_OPTIONS and then `options` (its constructor's keyword arguments). An
    unknown name or option is an error naming what is known."""
    chosen = name or os.environ.get(PROVIDER_ENV) or DEFAULT_PROVIDER
    given = {**(_env_options() if name is None or name == os.environ.get(PROVIDER_ENV) else {}), **options}
    check_options(chosen, given)
    provider: Provider = PROVIDERS.get(chosen)(**given)
    return provider


def check_options(name: str | None, options: Mapping[str, Any]) -> None:
    """InvalidInputError naming the options provider `name` (as make_provider chooses it) does
    not take, and those it does (NotFoundError for an unknown name, naming the known ones)."""
    name = name or os.environ.get(PROVIDER_ENV) or DEFAULT_PROVIDER
    accepted = _keywords(PROVIDERS.get(name))
    unknown = sorted(set(options) - accepted) if accepted is not None else []
    if unknown:
        raise InvalidInputError(
            f"sandbox provider {name!r} takes no option {', '.join(map(repr, unknown))}; it takes: {', '.join(sorted(accepted or ())) or 'none'}"
        )


def _env_options() -> dict[str, Any]:
    text = os.environ.get(OPTIONS_ENV)
    if not text:
        return {}
    try:
        options = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{OPTIONS_ENV} is not JSON: {exc}") from None
    if not isinstance(options, Mapping):
        raise InvalidInputError(f"{OPTIONS_ENV} must be a JSON object of the provider's options, got {type(options).__name__}")
    return dict(options)


def _keywords(cls: type) -> set[str] | None:
    """The keyword arguments `cls(...)` takes (None: any)."""
    parameters = list(inspect.signature(cls).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
