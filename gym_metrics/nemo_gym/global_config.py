"""NeMo Gym's global config as environments read it: the row-key names of a rollout's identity,
and `get_global_config_dict()`, which under gym-metrics is the config document the server was
built from (`load_config_server` sets it; blocks of other servers, a judge's, are in it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

TASK_INDEX_KEY_NAME = "_ng_task_index"
ROLLOUT_INDEX_KEY_NAME = "_ng_rollout_index"
ATTEMPT_INDEX_KEY_NAME = "_ng_attempt_index"
ROLLOUT_ID_KEY_NAME = "_ng_rollout_id"
CACHE_DIR_KEY_NAME = "cache_dir"
"""The config key naming a cache folder (None in a config that does not set it)."""

_DOCUMENT: dict[str, Any] = {}
_ROOT: list[Path] = []


def set_parent_dir(root: Path) -> None:
    """The root of the `resources_servers/` tree being served (`nemo_gym.PARENT_DIR`)."""
    _ROOT[:] = [root]


def parent_dir() -> Path:
    return _ROOT[0] if _ROOT else Path.cwd()


def set_global_config_dict(document: Mapping[str, Any]) -> None:
    """The config document of the server being served (called by load_config_server)."""
    _DOCUMENT.clear()
    _DOCUMENT.update(document)


def get_global_config_dict() -> dict[str, Any]:
    return _DOCUMENT


def maybe_get_global_config_dict() -> dict[str, Any] | None:
    return _DOCUMENT or None


def get_first_server_config_dict(global_config_dict: Mapping[str, Any], top_level_path: str) -> Any:
    """A server block's fields: `<name>: <server type>: <implementation>: {fields}`."""
    block = global_config_dict[top_level_path]
    block = list(block.values())[0]
    return list(block.values())[0]


__all__ = [
    "ATTEMPT_INDEX_KEY_NAME",
    "CACHE_DIR_KEY_NAME",
    "ROLLOUT_ID_KEY_NAME",
    "ROLLOUT_INDEX_KEY_NAME",
    "TASK_INDEX_KEY_NAME",
    "get_first_server_config_dict",
    "get_global_config_dict",
    "maybe_get_global_config_dict",
    "parent_dir",
    "set_global_config_dict",
    "set_parent_dir",
]
