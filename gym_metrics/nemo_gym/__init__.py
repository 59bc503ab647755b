"""NeMo Gym's module paths and public names, for environments ported by rewriting their imports
(`nemo_gym` -> `gym_metrics.nemo_gym`): `base_resources_server`, `openai_utils`, `config_types`,
`server_utils`, `reward_profile`, `judge`. docs/nemo-gym.md is the porting guide.

`load_config_server(config.yaml)` builds the resources server a NeMo Gym config describes
(what `gym-metrics serve CONFIG.yaml` serves)."""

from __future__ import annotations

from typing import Any

from gym_metrics.nemo_gym._environment_servers import (
    NO_RESULT_FAILURE_CLASSES, RELAY_TYPE, SESSION_TYPE, EnvironmentServer, environment_servers_of, episode_failure_row, relay_name,
    session_seed_body, session_verify_body,
)  # fmt: skip
from gym_metrics.nemo_gym._native import NATIVE_AGENTS
from gym_metrics.nemo_gym._recorded_calls import as_recorded


def load_agents(config: Any) -> Any:
    """The agents of the NeMo Gym config `config` that are not NATIVE_AGENTS, by block name, each
    built from its ported code in the config's tree on first use (_agents.AgentCodes)."""
    from gym_metrics.nemo_gym._agents import AgentCodes

    return AgentCodes(config)


def load_config_server(*args: Any, **kwargs: Any) -> Any:
    """See gym_metrics.nemo_gym._config.load_config_server (imported on first use)."""
    from gym_metrics.nemo_gym._config import load_config_server as load

    return load(*args, **kwargs)


def config_file(root: Any, env: str, name: str | None = None) -> Any:
    """The config of `root/resources_servers/<env>/` NeMo Gym's launcher would take: `name` under
    configs/, else `<env>.yaml`, else the first by name (_nemo_side.config_file)."""
    from gym_metrics.nemo_gym._nemo_side import config_file as find

    return find(root, env, name)


def config_agents(path: Any) -> tuple[str, list[tuple[str, str, Any]]]:
    """The resources server instance of the NeMo Gym config at `path` and (name, implementation,
    fields) of its agent blocks that run it (_config.config_agents)."""
    from gym_metrics.nemo_gym._config import config_agents as read

    return read(path)


def read_benchmark(spec: Any) -> Any:
    """The NeMo Gym benchmark `spec` names (its config's path, or NAME as `gym eval run
    --benchmark` takes it), as NeMo Gym reads it: its dataset, agent, repeats and prompt, and
    `row_maker` for its rows (_benchmark.py)."""
    from gym_metrics.nemo_gym._benchmark import benchmark_config, read_benchmark as read

    return read(benchmark_config(str(spec)))


def read_benchmarks(spec: Any, split: str = "benchmark") -> Any:
    """What `spec` names (as read_benchmark takes it): its benchmark, or its `Suite` when the
    config declares several benchmark datasets (an eval suite: `collate` writes NeMo Gym's
    collated file of them); `split`: its datasets of that type (`gym eval run ++split=train`;
    _benchmark.py)."""
    from gym_metrics.nemo_gym._benchmark import benchmark_config, read_benchmarks as read

    return read(benchmark_config(str(spec)), split)


def prompt_step(path: Any, flag: str = "--prompt-config") -> Any:
    """A NeMo Gym prompt template's change of a row (None without a path), the file read now
    (_benchmark.prompt_step)."""
    from gym_metrics.nemo_gym._benchmark import prompt_step as step

    return step(None if path is None else str(path), flag)


def dump_config(path: Any, name: str | None = None, overrides: Any = ()) -> str:
    """The config as `serve` reads it, in YAML, secret-shaped values masked (_config.dump_config)."""
    from pathlib import Path

    from gym_metrics.nemo_gym._config import dump_config as dump

    return dump(Path(path), name, overrides)


def benchmark_names(root: Any) -> list[str]:
    """The benchmarks of the NeMo Gym tree at `root`, named as `gym list benchmarks` names them
    (_benchmark.benchmark_names)."""
    from pathlib import Path

    from gym_metrics.nemo_gym._benchmark import benchmark_names as names

    return names(Path(root))


def environment_folder(config: Any, name: str | None = None) -> Any:
    """The folder NeMo Gym's launcher runs a config's server in (`cd` there, then `python
    app.py`): its `resources_servers/<env>/`, where the entrypoint is and where the environment's
    relative paths (a prompt template, a data file) start. `serve` and `check-env` run there."""
    from pathlib import Path

    from gym_metrics.nemo_gym._compose import read_blocks
    from gym_metrics.nemo_gym._config import _resources_block, server_folder

    path = Path(config)
    _, impl, _ = _resources_block(read_blocks(path), name, path)
    return server_folder(path, impl)


def _resolve_under_cwd_or_install(rel_path: Any, *, validator: Any = None) -> Any:
    """A relative path read under the working directory, else the tree being served (NeMo Gym:
    its extra roots, the working directory, then its install root)."""
    from pathlib import Path

    from gym_metrics.nemo_gym._compose import resolve_under, search_roots
    from gym_metrics.nemo_gym.global_config import parent_dir

    return resolve_under(rel_path, search_roots(parent_dir()), validator or Path.exists)


__all__ = ["NO_RESULT_FAILURE_CLASSES", "RELAY_TYPE", "SESSION_TYPE", "EnvironmentServer", "PARENT_DIR", "as_recorded", "benchmark_names", "config_agents", "config_file", "dump_config", "environment_folder", "environment_servers_of", "episode_failure_row", "load_config_server", "prompt_step", "read_benchmark", "read_benchmarks", "relay_name", "session_seed_body", "session_verify_body"]


_UNDER_PARENT = {"CACHE_DIR": "cache", "RESULTS_DIR": "results"}


def __getattr__(name: str) -> Any:
    """`PARENT_DIR`: the root of the `resources_servers/` tree being served (NeMo Gym's repository
    root), known once a config is loaded; the working directory until then. `CACHE_DIR` and
    `RESULTS_DIR` are its `cache/` and `results/`, as in a NeMo Gym checkout."""
    if name == "PARENT_DIR" or name in _UNDER_PARENT:
        from gym_metrics.nemo_gym.global_config import parent_dir

        return parent_dir() / _UNDER_PARENT[name] if name in _UNDER_PARENT else parent_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
