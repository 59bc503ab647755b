"""A scorer's options from a file: JSON (or YAML when pyyaml is installed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError


def read_scorer_config(path: Path | None) -> dict[str, Any] | None:
    """The options in `path` as a dict (None for no file, {} for an empty one)."""
    if path is None:
        return None
    if not path.is_file():
        raise InvalidInputError("scorer config not found", [FieldViolation("--scorer-config", f"{path}: no such file" if not path.exists() else f"{path}: not a file")])
    text = path.read_bytes()
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise GymMetricsError(f"{path}: YAML needs pyyaml (not installed); write the config as JSON") from None
        try:
            config = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidInputError(f"{path}: not valid YAML: {exc}") from None
    else:
        try:
            config = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            raise InvalidInputError(f"{path}: not valid JSON: {exc}") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise InvalidInputError(f"{path}: the scorer config must be an object, got {type(config).__name__}")
    return config


__all__ = ["read_scorer_config"]
