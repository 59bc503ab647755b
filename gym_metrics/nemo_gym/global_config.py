"""NeMo Gym's global config as environments read it: the row-key names of a rollout's identity,
and `get_global_config_dict()`, which under gym-metrics is the config document the server was
built from (`load_config_server` sets it; blocks of other servers, a judge's, are in it).
`GlobalConfigDictParser().parse(...)` composes a config as NeMo Gym does (_compose.py), for the
environments that build a server from a benchmark's config themselves (their verifier fixtures);
there is no NeMo Gym command line to read here, so `skip_load_from_cli` changes nothing."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Optional

from pydantic import BaseModel, ConfigDict

from gym_metrics.nemo_gym._compose import NO_POLICY_MODEL

TASK_INDEX_KEY_NAME = "_ng_task_index"
ROLLOUT_INDEX_KEY_NAME = "_ng_rollout_index"
ATTEMPT_INDEX_KEY_NAME = "_ng_attempt_index"
ROLLOUT_ID_KEY_NAME = "_ng_rollout_id"
CACHE_DIR_KEY_NAME = "cache_dir"
"""The config key naming a cache folder (None in a config that does not set it)."""
CONFIG_PATHS_KEY_NAME = "config_paths"
AGENT_REF_KEY_NAME = "agent_ref"
TASK_SOURCE_KEY_NAME = "task_source"
SKILLS_REF_KEY_NAME = "skills_ref"
HEAD_SERVER_KEY_NAME = "head_server"
"""The block of NeMo Gym's head server (`host`, `port`) in a config its launcher resolved."""
POLICY_BASE_URL_KEY_NAME = "policy_base_url"
POLICY_API_KEY_KEY_NAME = "policy_api_key"
POLICY_MODEL_NAME_KEY_NAME = "policy_model_name"
POLICY_MODEL_KEY_NAME = "policy_model"
OBSERVABILITY_ENABLED_KEY_NAME = "observability_enabled"
"""The run-wide switch of NeMo Gym's model-call capture (its agents then record their evidence)."""

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


HF_TOKEN_KEY_NAME = "hf_token"


def get_hf_token() -> Optional[str]:
    """The config's Hugging Face token (`hf_token`), as benchmarks' prepare scripts read it."""
    return get_global_config_dict().get(HF_TOKEN_KEY_NAME)


def get_first_server_config_dict(global_config_dict: Mapping[str, Any], top_level_path: str) -> Any:
    """A server block's fields: `<name>: <server type>: <implementation>: {fields}`."""
    block = global_config_dict[top_level_path]
    block = list(block.values())[0]
    return list(block.values())[0]


class GlobalConfigDictParserConfig(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    dotenv_path: Optional[Path] = None
    initial_global_config_dict: Optional[Any] = None
    skip_load_from_cli: bool = False
    skip_load_from_dotenv: bool = False
    hide_secrets: bool = False
    offline: bool = False

    NO_MODEL_GLOBAL_CONFIG_DICT: ClassVar[dict[str, Any]] = {
        POLICY_BASE_URL_KEY_NAME: "",
        POLICY_API_KEY_KEY_NAME: "",
        POLICY_MODEL_NAME_KEY_NAME: "",
        POLICY_MODEL_KEY_NAME: NO_POLICY_MODEL,
    }
    """The policy keys a config may interpolate, empty, for composing without a model."""


class GlobalConfigDictParser(BaseModel):
    def parse(self, parse_config: Optional[GlobalConfigDictParserConfig] = None) -> Any:
        """The composed config (an OmegaConf DictConfig): `initial_global_config_dict`'s
        `config_paths` loaded, `env.yaml` (or `dotenv_path`) over them unless skipped, the
        initial dict over all; relative paths under the working directory, then the served tree."""
        from gym_metrics.nemo_gym._compose import parse, resolve_under, search_roots

        given = parse_config or GlobalConfigDictParserConfig()
        roots = search_roots(parent_dir())
        dotenv = None if given.skip_load_from_dotenv else Path(given.dotenv_path or resolve_under("env.yaml", roots))
        merged = parse(given.initial_global_config_dict, roots, dotenv if dotenv is not None and dotenv.is_file() else None, parent_dir())
        _give_addresses(merged, given.offline)
        return merged


SERVER_KINDS = ("resources_servers", "responses_api_agents", "responses_api_models", "environment_servers")


def _give_addresses(document: Any, offline: bool) -> None:
    """Every server block without a host gets the config's `default_host` (else 127.0.0.1) and
    without a port a free one, as NeMo Gym's parser gives them; offline, port -1 (resolving a
    config offline allocates nothing)."""
    import socket

    from omegaconf import DictConfig, open_dict

    host = document.get("default_host") or "127.0.0.1"
    for block in document.values():
        if not isinstance(block, DictConfig) or len(block) != 1 or next(iter(block)) not in SERVER_KINDS:
            continue
        for server in next(iter(block.values())).values():
            if not isinstance(server, DictConfig):
                continue
            with open_dict(server):
                if not server.get("host"):
                    server["host"] = host
                if not server.get("port"):
                    if offline:
                        server["port"] = -1
                    else:
                        with socket.socket() as probe:
                            probe.bind((server["host"], 0))
                            server["port"] = probe.getsockname()[1]


__all__ = [
    "AGENT_REF_KEY_NAME",
    "ATTEMPT_INDEX_KEY_NAME",
    "CONFIG_PATHS_KEY_NAME",
    "GlobalConfigDictParser",
    "GlobalConfigDictParserConfig",
    "HEAD_SERVER_KEY_NAME",
    "HF_TOKEN_KEY_NAME",
    "get_hf_token",
    "POLICY_API_KEY_KEY_NAME",
    "POLICY_BASE_URL_KEY_NAME",
    "POLICY_MODEL_KEY_NAME",
    "POLICY_MODEL_NAME_KEY_NAME",
    "CACHE_DIR_KEY_NAME",
    "ROLLOUT_ID_KEY_NAME",
    "ROLLOUT_INDEX_KEY_NAME",
    "SKILLS_REF_KEY_NAME",
    "TASK_INDEX_KEY_NAME",
    "TASK_SOURCE_KEY_NAME",
    "get_first_server_config_dict",
    "get_global_config_dict",
    "maybe_get_global_config_dict",
    "parent_dir",
    "set_global_config_dict",
    "set_parent_dir",
]
