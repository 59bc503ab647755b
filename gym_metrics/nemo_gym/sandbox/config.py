"""A config's `sandbox_provider` made into a provider config (`nemo_gym.sandbox.config`): either
the name of a top-level block of the merged config (`sandbox_provider: sandbox`, the block
`sandbox: {local: {...}}`) or that single-key mapping inline. A block's reserved
`default_metadata` are labels the sandbox's own `metadata` may override."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_METADATA = "default_metadata"


def _providers_in(block: Mapping[str, Any]) -> list[str]:
    return [key for key in block if key != DEFAULT_METADATA]


def _block(sandbox_provider: str | Mapping[str, Any], named: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """The block and where it came from (for messages)."""
    if isinstance(sandbox_provider, str):
        if not sandbox_provider:
            raise ValueError("Sandbox provider reference must be a non-empty string")
        found = named.get(sandbox_provider) if named is not None else None
        if found is None:
            candidates = sorted(str(k) for k, v in (named or {}).items() if isinstance(v, Mapping) and len(_providers_in(v)) == 1)
            raise ValueError(
                f"Sandbox provider reference {sandbox_provider!r} is not defined in the merged config. Define a top-level "
                f"'{sandbox_provider}:' block (e.g. {{local: {{}}}}) and include it in your config. Available sandbox configs: "
                f"{', '.join(map(repr, candidates)) or '(none)'}"
            )
        where = f"reference {sandbox_provider!r}"
    elif isinstance(sandbox_provider, Mapping):
        found, where = sandbox_provider, "inline sandbox_provider config"
    else:
        raise TypeError(f"sandbox_provider must be a name reference (str) or a single-key provider mapping, got {type(sandbox_provider).__name__}")
    if not isinstance(found, Mapping):
        raise ValueError(f"Sandbox provider config from {where} must be a mapping, got: {found!r}")
    return dict(found), where


def resolve_provider_config(sandbox_provider: str | Mapping[str, Any], named_configs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """`{provider_name: its options}` for `create_provider`; a block without exactly one
    provider key is a ValueError."""
    block, where = _block(sandbox_provider, named_configs)
    keys = _providers_in(block)
    if len(keys) != 1:
        raise ValueError(f"Sandbox provider config from {where} must have exactly one provider key {{provider_name: config}}, got keys: {keys!r}")
    return {keys[0]: block[keys[0]]}


def resolve_provider_metadata(sandbox_provider: str | Mapping[str, Any], named_configs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The block's `default_metadata` ({} without)."""
    block, where = _block(sandbox_provider, named_configs)
    metadata = block.get(DEFAULT_METADATA) or {}
    if not isinstance(metadata, Mapping):
        raise ValueError(f"Sandbox '{DEFAULT_METADATA}' from {where} must be a mapping, got: {metadata!r}")
    return dict(metadata)
