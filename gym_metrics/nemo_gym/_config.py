"""A NeMo Gym config YAML to the resources server it describes, built as NeMo Gym builds it:
the block whose inner key is `resources_servers` (`<name>: resources_servers: <impl>: {...}`),
its `entrypoint` loaded from the environment's folder (configs/ is inside it), the server class
that file defines, and its `config` from the block's fields with `name` = the block's key."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping, Sequence
from difflib import get_close_matches
from pathlib import Path
from typing import Any

import pydantic

from gym_metrics._util.http import HttpClientConfig
from gym_metrics.environments import load_module_file
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.nemo_gym._compose import agents_of, read_blocks, tree_root
from gym_metrics.nemo_gym._environment_servers import environment_servers_of
from gym_metrics.nemo_gym.base_resources_server import SimpleResourcesServer
from gym_metrics.nemo_gym.global_config import set_global_config_dict, set_parent_dir
from gym_metrics.nemo_gym.server_utils import ServerClient


def load_config_server(
    path: str | Path,
    *,
    name: str | None = None,
    overrides: Sequence[str] = (),
    servers: Mapping[str, str | HttpClientConfig] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    server_class: type[SimpleResourcesServer] | None = None,
    in_folder: bool = False,
) -> SimpleResourcesServer:
    """The resources server of the config at `path` (the one named `name` when the file holds
    several). `overrides` are `key=value` settings of its fields (the value read as YAML);
    `servers` maps model-server names (a judge) to their base URLs or model target configs; `server_class` replaces
    the class the block's entrypoint defines. `in_folder`: the working directory becomes the
    environment's folder (server_folder) before its code is imported, as NeMo Gym runs it."""
    path = Path(path)
    document = read_blocks(path)
    block_name, impl, fields = _resources_block(document, name, path)
    folder = server_folder(path, impl)
    if in_folder:
        os.chdir(folder)
    set_global_config_dict(_with_addresses(document, servers or {}))
    given = []
    for setting in overrides:
        key, value = _override(setting)
        _set(fields, key, value)
        given.append(key.split(".")[0])
    refuse_missing(fields, block_name, path)
    cls = server_class or _server_class(folder / str(fields.get("entrypoint", "app.py")), path)
    _check_hooks(cls)
    config_cls = cls.model_fields["config"].annotation
    _refuse_undeclared(given, config_cls, cls.__name__)
    try:
        config = config_cls.model_validate({"host": host, "port": port, **fields, "name": block_name})  # type: ignore[union-attr]
        server = cls(config=config, server_client=ServerClient(servers))
    except pydantic.ValidationError as exc:
        violations = [FieldViolation(f"{block_name}.{'.'.join(map(str, e['loc']))}", e["msg"]) for e in exc.errors()[:20]]
        raise InvalidInputError(f"{path}: the {impl} config does not fit {cls.__name__}", violations) from None
    server._agent_max_steps = agent_max_steps(document, block_name, path)
    agents = agents_of(document, block_name)
    server._agent_types = {name: impl for name, impl, _ in agents}
    server._agent_model_servers = {name: str(ref["name"]) for name, _, fields in agents
                                   if isinstance(ref := fields.get("model_server"), Mapping) and ref.get("name") is not None}  # fmt: skip
    fronts = environment_servers_of(document)
    server._environment_servers = {name: fronts[name] for name in server._agent_types if name in fronts}
    return server


MASKED = "****"


def dump_config(path: Path, name: str | None = None, overrides: Sequence[str] = ()) -> str:
    """The config as `serve` reads it, in YAML: composed, each block's interpolations resolved
    (a block that cannot be is shown as written), `overrides` set on the served block, and every
    value under a key holding `token`, `key` or `header` masked, as NeMo Gym's `gym env resolve`
    masks them (`max_tokens` included): a dump to read or share, never a secret."""
    import yaml

    document = read_blocks(path)
    block, impl, _ = _resources_block(document, name, path)
    fields = document[block]["resources_servers"][impl]
    for setting in overrides:
        key, value = _override(setting)
        fields[key] = value
    return yaml.safe_dump(_masked(dict(document)), sort_keys=False, allow_unicode=True)


def _masked(node: Any, secret: bool = False) -> Any:
    """`node` with the values of secret-shaped keys masked (NeMo Gym's recursively_hide_secrets)."""
    if isinstance(node, Mapping):
        return {k: _masked(v, _secret_key(str(k))) for k, v in node.items()}
    if isinstance(node, list):
        return [MASKED] * len(node) if secret else [_masked(v) for v in node]
    return MASKED if secret else node


def _secret_key(key: str) -> bool:
    return "token" in key or "key" in key or "header" in key


def agent_max_steps(document: Any, resources_name: str, path: Path) -> dict[str, int]:
    """`max_steps` of each agent block (`<name>: responses_api_agents: <impl>: {...}`) whose
    `resources_server.name` is `resources_name`, by the block's name: the bound NeMo Gym's
    simple_agent and gymnasium_agent put on its episodes (none given: no bound)."""
    found: dict[str, int] = {}
    for name, _, fields in agents_of(document, resources_name):
        if fields.get("max_steps") is None:
            continue
        steps = fields["max_steps"]
        if isinstance(steps, str) and steps.strip().isdigit():  # `${oc.env:MAX_STEPS,10}` is text: NeMo Gym's pydantic reads it
            steps = int(steps)
        if type(steps) is not int or steps < 0:
            raise InvalidInputError("bad max_steps", [FieldViolation(f"{name}.max_steps", f"{path}: {steps!r} is not a whole number >= 0")])
        if steps:  # 0: no bound, as NeMo Gym reads it
            found[str(name)] = steps
    return found


def config_agents(path: Path) -> tuple[str, list[tuple[str, str, Mapping[str, Any]]]]:
    """The resources server instance of the config at `path` (as load_config_server picks it)
    and the agent blocks that run it (agents_of)."""
    document = read_blocks(Path(path))
    instance, _, _ = _resources_block(document, None, Path(path))
    return instance, agents_of(document, instance)


def _with_addresses(document: Any, servers: Mapping[str, Any]) -> Any:
    """Each server given by URL (or target) with its `host` and `port` in its block, as NeMo Gym's
    launcher fills them in (an environment that probes its judge builds the URL from them); a
    block made for a server the config does not define."""
    from urllib.parse import urlsplit

    for name, given in servers.items():
        where = urlsplit(given if isinstance(given, str) else given.url)
        try:
            port = where.port or (443 if where.scheme == "https" else 80)
        except ValueError:
            raise InvalidInputError("bad --server", [FieldViolation(f"server.{name}", f"{where.geturl()!r}: the port is not a number")]) from None
        address = {"host": where.hostname, "port": port}
        block = document.get(name) if isinstance(document, Mapping) else None
        inner = next(iter(block.values()), None) if isinstance(block, dict) and len(block) == 1 else None
        fields = next(iter(inner.values()), None) if isinstance(inner, dict) and len(inner) == 1 else None
        if isinstance(fields, dict):
            fields.update(address)
        elif isinstance(document, dict):
            document[name] = {"responses_api_models": {"given_server": address}}
    return document


def server_folder(path: Path, impl: str) -> Path:
    """The folder NeMo Gym's launcher runs a resources server in: `resources_servers/<impl>/` of
    the config's tree (a benchmark's config names an environment elsewhere in the tree), else the
    folder holding the config's `configs/`."""
    root = tree_root(path)
    if root is not None and (root / "resources_servers" / impl).is_dir():
        return root / "resources_servers" / impl
    folder = path.resolve().parent.parent
    if root is not None and folder.parent == (root / "resources_servers").resolve() and folder.name != impl:
        # in the tree, under another name: NeMo Gym's launcher looks for resources_servers/<impl>, not found (a misspelt key)
        close = get_close_matches(impl, [p.name for p in (root / "resources_servers").iterdir() if p.is_dir()], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        why = f"{path}: resources_servers: {impl}: {root / 'resources_servers' / impl} is not a folder{hint}"
        raise InvalidInputError("the config names an environment the tree does not have", [FieldViolation("resources_servers", why)])
    return folder


def _resolved(document: Any, block: str, path: Path) -> None:
    """InvalidInputError when the config's block `block` has an interpolation that cannot be resolved."""
    why = getattr(document, "unresolved", {}).get(block)
    if why is not None:
        raise InvalidInputError("config interpolation failed", [FieldViolation(block, f"{path}: {why}")])


def _resources_block(document: Any, name: str | None, path: Path) -> tuple[str, str, dict[str, Any]]:
    """(block name, implementation key, its fields) of the resources server chosen."""
    blocks = {}
    if isinstance(document, Mapping):
        for key, value in document.items():
            inner = value.get("resources_servers") if isinstance(value, Mapping) else None
            if isinstance(inner, Mapping) and len(inner) == 1:
                impl, fields = next(iter(inner.items()))
                if fields is not None and not isinstance(fields, Mapping):
                    why = f"{path}: {type(fields).__name__}, expected the server's fields (a mapping)"
                    raise InvalidInputError("bad resources server block", [FieldViolation(f"{key}.resources_servers.{impl}", why)])
                blocks[str(key)] = (str(impl), dict(fields or {}))
    if not blocks:
        raise InvalidInputError("no resources server in the config", [FieldViolation("config", f"{path}: no `<name>: resources_servers: <env>: ...` block")])
    if name is None:
        if len(blocks) > 1:
            raise InvalidInputError("several resources servers in the config", [FieldViolation("name", f"pick one of {', '.join(blocks)}")])
        name = next(iter(blocks))
    if name not in blocks:
        raise InvalidInputError("unknown resources server", [FieldViolation("name", f"{name!r} is not in {path}: {', '.join(blocks)}")])
    _resolved(document, name, path)
    impl, fields = blocks[name]
    return name, impl, fields


def _override(setting: str) -> tuple[str, Any]:
    import yaml

    key, sep, text = setting.partition("=")
    if not sep or not key.strip():
        raise InvalidInputError("bad --set", [FieldViolation("set", f"{setting!r}: expected key=value")])
    try:
        return key.strip(), yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidInputError("bad --set", [FieldViolation("set", f"{setting!r}: the value is not YAML ({str(exc).splitlines()[0]})")]) from None


def _set(fields: dict[str, Any], key: str, value: Any) -> None:
    """`key`'s value in `fields`; a dotted key (`judge.model=x`) sets the nested field, as NeMo
    Gym's `++block.field.sub=x` does."""
    *parents, last = key.split(".")
    at = fields
    for part in parents:
        inner = at.get(part)
        if not isinstance(inner, dict):
            inner = at[part] = {}
        at = inner
    at[last] = value


_BLOCK_KEYS = {"entrypoint", "domain", "description", "value", "verified", "host", "port"}
"""Keys of every NeMo Gym server block, whatever its config class declares."""


def _refuse_undeclared(given: list[str], config_cls: Any, server: str) -> None:
    """InvalidInputError for a `--set` field the config class does not declare (and would drop
    without a word), naming the closest it does."""
    declared = set(getattr(config_cls, "model_fields", {})) | _BLOCK_KEYS
    unknown = [key for key in given if key not in declared]
    if unknown and getattr(config_cls, "model_config", {}).get("extra") != "allow":
        close = get_close_matches(unknown[0], sorted(declared), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise InvalidInputError("bad --set", [FieldViolation("set", f"{unknown[0]!r}: {server}'s config has no such field{hint}")])


MISSING = "???"
"""OmegaConf's mandatory value: a field the config leaves for the run to give."""


def refuse_missing(fields: Mapping[str, Any], block: str, path: Path) -> None:
    """InvalidInputError naming each field the config leaves `???` (NeMo Gym refuses to start
    without it; it was served as the text "???")."""
    found: list[str] = []

    def walk(value: Any, where: str) -> None:
        if isinstance(value, str) and value == MISSING:
            found.append(where)
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                walk(inner, f"{where}.{key}" if where else str(key))
        elif isinstance(value, list):
            for i, inner in enumerate(value):
                walk(inner, f"{where}[{i}]")

    walk(fields, "")
    if found:
        raise InvalidInputError(
            "a config value is not given", [FieldViolation(f"{block}.{k}", f"{path}: ??? (give it: --set {k}=VALUE)") for k in found[:10]]
        )


def _server_class(entry: Path, config_path: Path) -> type[SimpleResourcesServer]:
    """The resources server class the entrypoint file defines (the one subclass of
    SimpleResourcesServer declared in it)."""
    if not entry.is_file():
        raise InvalidInputError("entrypoint not found", [FieldViolation("entrypoint", f"{entry} (from {config_path})")])
    module = load_entry(entry)
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, SimpleResourcesServer) and value.__module__ == module.__name__
    ]
    if len(found) != 1:
        what = ", ".join(c.__name__ for c in found) or "none"
        raise InvalidInputError(
            "cannot tell the server class", [FieldViolation("entrypoint", f"{entry} defines {what} (one SimpleResourcesServer subclass expected)")]
        )
    return found[0]


def load_entry(entry: Path) -> Any:
    """The entrypoint as NeMo Gym imports it: inside a `resources_servers/<env>/` (or an agent's
    `responses_api_agents/<agent>/`) folder, as the module `resources_servers.<env>.app` with
    that tree's root on the import path (environments and agents import their own modules, and
    others', by that path); elsewhere as a file."""
    env_dir = entry.resolve().parent
    if env_dir.parent.name not in ("resources_servers", "responses_api_agents"):
        return load_module_file(entry)
    set_parent_dir(env_dir.parent.parent)
    for folder in (str(env_dir.parent.parent), str(env_dir)):  # the tree's root, and the env's own folder
        if folder not in sys.path:  # (as `python app.py` has it: bare imports of its sibling files)
            sys.path.insert(0, folder)
    try:
        return importlib.import_module(f"{env_dir.parent.name}.{env_dir.name}.{entry.stem}")
    except Exception as exc:  # ImportError, SyntaxError, or the module's own code raising as it loads
        where = f"{exc.filename}:{exc.lineno}" if isinstance(exc, SyntaxError) else str(entry)
        raise InvalidInputError(
            "cannot load the environment", [FieldViolation("entrypoint", f"{where}: {type(exc).__name__}: {exc}")]
        ) from None


def _check_hooks(cls: type[SimpleResourcesServer]) -> None:
    """Refuse, before serving, a class that is not a ported NeMo Gym resources server."""
    if not (isinstance(cls, type) and issubclass(cls, SimpleResourcesServer)):
        raise InvalidInputError("not a NeMo Gym resources server", [FieldViolation("target", f"{cls!r} is not a gym_metrics.nemo_gym SimpleResourcesServer")])


__all__ = ["load_config_server"]
