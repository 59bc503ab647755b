"""NeMo Gym's config composition: a config's `config_paths` loaded and merged, then its
directives applied, so a benchmark config (`benchmarks/aime24/config.yaml`: the environment's
config included, its blocks renamed with `_inherit_from`) composes to what NeMo Gym runs.

- `config_paths`: each entry's file is loaded, and the entries it names in turn (an entry
  already listed is not loaded twice). A file overrides every file it pulled in; of files listed
  together, a later one (with all it pulled in) overrides an earlier one. A relative entry is
  looked up under the working directory, then the tree being served, then the tree of the file
  that names it (the folder above it holding `resources_servers/`).
- `_inherit_from: a.b` (or the value `${inherit_from:a.b}`): the block becomes a copy of `a.b`
  with its own keys merged over it, and `a.b` is removed; `_copy` / `${copy:a.b}` the same
  without the removal; `_delete_key: k1, k2` removes those keys from the block. As NeMo Gym,
  the copied value is the one before any directive ran, and its own directives are not applied.

The result is an OmegaConf document with its interpolations unresolved (the reader resolves each
block when it is used). NeMo Gym's later steps (CLI overrides, retargeting environment servers
after an agent is renamed) are not mirrored: gym-metrics serves one resources server a config
names, and `--set` overrides its fields."""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError

CONFIG_PATHS = "config_paths"
INHERIT_FROM = "_inherit_from"
COPY = "_copy"
DELETE_KEY = "_delete_key"
_MISSING = object()
NO_POLICY_MODEL = {"responses_api_models": {"dummy_model": {"entrypoint": "app.py"}}}


def tree_root(config: Path) -> Path | None:
    """The folder above `config` that holds `resources_servers/` (NeMo Gym's repository root)."""
    for folder in Path(config).resolve().parents:
        if (folder / "resources_servers").is_dir():
            return folder
    return None


def search_roots(*more: Path | None) -> list[Path]:
    """Where a relative path is looked up, as NeMo Gym's component_search_roots orders them:
    the roots of $NEMO_GYM_EXTRA_ROOTS first (a user's plugin shadows a built-in config or
    env.yaml), then the working directory, then `more`, in order."""
    extra = [Path(p) for p in os.environ.get("NEMO_GYM_EXTRA_ROOTS", "").split(os.pathsep) if p]
    roots: list[Path] = []
    for root in (*extra, Path.cwd(), *more):
        if root is not None and root.resolve() not in {r.resolve() for r in roots}:
            roots.append(root)
    return roots


def resolve_under(path: str | Path, roots: list[Path], valid: Callable[[Path], bool] = Path.exists) -> Path:
    """`path` itself when absolute; else under the first root where it is `valid` (exists),
    else under the first root."""
    given = Path(path)
    if given.is_absolute():
        return given
    return next((root / given for root in roots if valid(root / given)), roots[0] / given)


def load_yaml(path: Path, entry: str | None = None) -> Any:
    """One YAML file as OmegaConf reads it; a clear error for a missing or malformed one."""
    import yaml
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    where = "config" if entry is None else f"config_paths: {entry}"
    try:
        return OmegaConf.load(path)
    except FileNotFoundError:
        raise InvalidInputError("config not found", [FieldViolation(where, f"{path}: no such file")]) from None
    except (yaml.YAMLError, OmegaConfBaseException) as exc:
        raise InvalidInputError("config is not valid YAML", [FieldViolation(where, f"{path}: {exc}")]) from None


def load_config_paths(entries: list[str], roots: list[Path]) -> tuple[list[str], list[Any]]:
    """Every entry (those the files name appended) and their configs in merge order: each file
    after all it pulled in, siblings in listed order, each file's subtree together."""
    entries, listed = list(entries), len(entries)
    children: list[list[int]] = [[] for _ in entries]
    where: list[list[Path]] = [roots for _ in entries]  # an entry's roots: its includer's tree last
    configs = []
    index = 0
    while index < len(entries):  # entries grows as files name more
        entry = entries[index]
        found = resolve_under(entry, where[index])
        config = _mapping(load_yaml(found, entry if index >= listed else None), found)  # (the caller's own: "config")
        for more in _entries(config.get(CONFIG_PATHS), found):
            if more not in entries:
                entries.append(more)
                children.append([])
                where.append(search_roots(*roots, tree_root(found)))
                children[index].append(len(entries) - 1)
        configs.append(config)
        index += 1
    order: list[int] = []

    def visit(i: int) -> None:  # post-order: a file after everything it pulled in
        for child in children[i]:
            visit(child)
        order.append(i)

    for root in range(listed):
        visit(root)
    return entries, [configs[i] for i in order]


def _mapping(config: Any, path: Path) -> Any:
    from omegaconf import DictConfig

    if not isinstance(config, DictConfig):
        raise InvalidInputError("config is not a mapping", [FieldViolation("config", f"{path}: its top level is not `key: value` blocks")])
    return config


def _entries(value: Any, where: object) -> list[str]:
    """A `config_paths` value as a list of paths; an error naming the file when it is not one."""
    from omegaconf import OmegaConf

    listed = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
    if listed is None:
        return []
    if not isinstance(listed, list) or not all(isinstance(e, str) for e in listed):
        raise InvalidInputError("bad config_paths", [FieldViolation(CONFIG_PATHS, f"{where}: {listed!r} is not a list of paths")])
    return listed


def compose(path: Path, roots: list[Path] | None = None, given: dict[str, Any] | None = None) -> Any:
    """The config at `path` as `gym env start --config PATH` composes it: its `config_paths`
    merged, the `env.yaml` of the working directory (else of the tree) over them, directives
    applied. A run of NeMo Gym always has a `policy_model` block (blocks inherit from it, a user
    simulator's model server); the policy is collect's here, so it is NeMo Gym's placeholder
    unless a config or env.yaml defines it. `given`: top-level values merged over the config's,
    which it may interpolate (NeMo Gym reads a benchmark with its policy keys empty)."""
    from omegaconf.errors import OmegaConfBaseException

    root = tree_root(path)
    roots = roots if roots is not None else search_roots(root)
    dotenv = resolve_under("env.yaml", roots)
    initial = {**(given or {}), CONFIG_PATHS: [str(path)], "policy_model": NO_POLICY_MODEL}
    try:
        return parse(initial, roots, dotenv if dotenv.is_file() else None, root or Path.cwd())
    except (OmegaConfBaseException, TypeError, ValueError) as exc:  # a merge of a mapping over a list, a bad directive, ...
        if isinstance(exc, GymMetricsError):
            raise
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InvalidInputError("the config does not compose", [FieldViolation("config", f"{path}: {type(exc).__name__}: {why}")]) from None


class Blocks(dict[str, Any]):
    """A config's top-level blocks, each with its interpolations resolved (`unresolved`: the
    blocks that cannot be, and why; an error only when the block is used, as NeMo Gym resolves
    a server's block when it builds that server)."""

    unresolved: dict[str, str]


def read_blocks(path: Path, given: dict[str, Any] | None = None) -> Blocks:
    """The config as NeMo Gym reads it: OmegaConf's YAML (`1e-6` is a float), composed
    (`compose`, `given` as there), every block's interpolations resolved against the whole
    document (`${oc.env:VAR,default}`, `${oc.select:key,default}`, `${other.key}`), as its
    servers resolve their blocks."""
    try:
        from omegaconf import OmegaConf
        from omegaconf.errors import OmegaConfBaseException
    except ImportError:
        raise InvalidInputError("NeMo Gym configs are read by omegaconf", [FieldViolation("config", "pip install 'gym-metrics[nemo-gym]'")]) from None

    raw = compose(path, given=given)  # (a mapping: compose refuses anything else)
    plain: Any = OmegaConf.to_container(raw, resolve=False)
    blocks = Blocks()
    blocks.unresolved = {}
    for key, unresolved in plain.items():
        try:
            value = raw[key]
            blocks[str(key)] = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        except OmegaConfBaseException as exc:
            blocks[str(key)] = unresolved
            blocks.unresolved[str(key)] = str(exc).splitlines()[0]
    return blocks


CHECKED_REFS = ("resources_servers", "responses_api_agents")
"""The server references NeMo Gym refuses when they name no block of the merged config (model
servers are the run's to give: a benchmark names `policy_model` before any model is set)."""


def refuse_dangling_refs(document: Any, path: Path) -> None:
    """InvalidInputError, in NeMo Gym's words (its ServerRefNotFoundError), for a resources server
    or agent block whose field references a resources server or agent the config does not define
    (a block renamed away by `_inherit_from` that another still names)."""
    from difflib import get_close_matches

    servers: dict[str, list[str]] = {kind: [] for kind in CHECKED_REFS}
    for name, block in document.items() if isinstance(document, Mapping) else ():
        kind = next(iter(block), None) if isinstance(block, Mapping) and len(block) == 1 else None
        if kind in servers:
            servers[kind].append(str(name))
    for name, block in document.items() if isinstance(document, Mapping) else ():
        kind = next(iter(block), None) if isinstance(block, Mapping) and len(block) == 1 else None
        inner = block[kind] if kind in servers else None
        fields = next(iter(inner.values())) if isinstance(inner, Mapping) and len(inner) == 1 else None
        for field, ref in fields.items() if isinstance(fields, Mapping) else ():
            if not (isinstance(ref, Mapping) and set(ref) == {"type", "name"} and ref["type"] in servers) or ref["name"] in servers[ref["type"]]:
                continue
            close = get_close_matches(str(ref["name"]), servers[ref["type"]], n=3, cutoff=0.6)
            hint = (f"Did you mean: {', '.join(map(repr, close))}?" if close
                    else f"Available {ref['type']}: {', '.join(map(repr, sorted(servers[ref['type']]))) or '(none)'}")  # fmt: skip
            why = f"{path}: In server instance '{name}', field '{field}' references {ref['type']}/'{ref['name']}', which is not defined in the merged config. {hint}"
            raise InvalidInputError("a server reference names nothing", [FieldViolation(f"{name}.{field}", why)])


def agents_of(document: Any, resources_name: str) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(block name, agent implementation, fields) of the config's agent blocks
    (`<name>: responses_api_agents: <impl>: {...}`) whose `resources_server.name` is `resources_name`."""
    found = []
    for name, block in document.items() if isinstance(document, Mapping) else ():
        inner = block.get("responses_api_agents") if isinstance(block, Mapping) else None
        if not isinstance(inner, Mapping) or len(inner) != 1:
            continue
        impl, fields = next(iter(inner.items()))
        ref = fields.get("resources_server") if isinstance(fields, Mapping) else None
        if isinstance(ref, Mapping) and ref.get("name") == resources_name:
            found.append((str(name), str(impl), fields))
    return found


def register_directive_resolvers() -> None:
    """OmegaConf resolvers `inherit_from` and `copy`, each giving back its own text, as NeMo Gym
    registers them: a directive string composition does not apply (a block inheriting from
    itself, one inside a list or a copied subtree) reads as that text; without them, reading it
    (or composing a self-reference) raised UnsupportedInterpolationType."""
    import warnings

    from omegaconf import OmegaConf

    for name in ("inherit_from", "copy"):
        if not OmegaConf.has_resolver(name):
            with warnings.catch_warnings():  # (omegaconf 2.4 renames it register_resolver; 2.3 has only this one)
                warnings.simplefilter("ignore")
                OmegaConf.register_new_resolver(name, lambda path, _name=name: f"${{{_name}:{path}}}")


def parse(initial: Any, roots: list[Path], dotenv: Path | None = None, working: Path | None = None) -> Any:
    """NeMo Gym's global config without its command line: `initial`'s `config_paths` (else the
    dotenv's) loaded, then the dotenv file's values over them, then `initial`'s over all;
    `results_dir` and `cache_dir` default to `working`'s `results/` and `cache/` (NeMo Gym's
    working directory: its checkout's root), which configs interpolate."""
    from omegaconf import OmegaConf, open_dict

    register_directive_resolvers()
    first: Any = OmegaConf.create(initial or {})
    dotenv_config: Any = _mapping(load_yaml(dotenv), dotenv) if dotenv is not None else OmegaConf.create({})
    early: Any = OmegaConf.merge(dotenv_config, first)
    listed = _entries(early.get(CONFIG_PATHS), "the initial config")
    entries, configs = load_config_paths(listed, roots)
    merged: Any = OmegaConf.merge(*configs, dotenv_config, first)
    if entries:
        with open_dict(merged):
            merged[CONFIG_PATHS] = entries
    apply_directives(merged)
    _merge_dummy_model(merged)
    with open_dict(merged):
        for key, folder in (("results_dir", "results"), ("cache_dir", "cache")):
            given = merged.get(key) or str((working or roots[0]) / folder)
            merged[key] = str(Path(given).expanduser().resolve())
    return merged


def _merge_dummy_model(document: Any) -> None:
    """A model block holding NeMo Gym's placeholder `dummy_model` beside a real one: the real one's
    fields over the placeholder's (GlobalConfigDictParserConfig.NO_MODEL_GLOBAL_CONFIG_DICT)."""
    from omegaconf import DictConfig, OmegaConf, open_dict

    with open_dict(document):
        for block in document.values():
            models = block.get("responses_api_models") if isinstance(block, DictConfig) else None
            if isinstance(models, DictConfig) and "dummy_model" in models and len(models) > 1:
                dummy = models.pop("dummy_model")
                real = next(iter(models))
                models[real] = OmegaConf.merge(dummy, models[real])


def apply_directives(document: Any) -> None:
    """`_inherit_from`, `_copy` and `_delete_key` applied in place, as NeMo Gym applies them."""
    from omegaconf import open_dict

    frozen = copy.deepcopy(document)
    with open_dict(document):
        _apply(document, document, frozen)


def _apply(level: Any, root: Any, frozen: Any) -> None:
    from omegaconf import DictConfig, ListConfig, OmegaConf

    for key, value in list(level.items_ex(resolve=False)):
        deleting: set[str] = set()
        if isinstance(value, DictConfig) and DELETE_KEY in value:
            keys = value.pop(DELETE_KEY)
            if not isinstance(keys, str):  # a YAML list was read as its text and deleted nothing
                raise InvalidInputError("bad _delete_key", [FieldViolation(f"{key}.{DELETE_KEY}", f"{type(keys).__name__}: expected the keys as text, comma-separated")])
            deleting = {k.strip() for k in keys.split(",")}
            present = {k for k in deleting if k in value}
            for k in present:
                value.pop(k)
            deleting -= present
        if isinstance(value, DictConfig):
            _apply(value, root, frozen)
        elif isinstance(value, ListConfig):
            for i in range(len(value)):  # (nodes, not values: an interpolation stays unresolved)
                node = value._get_node(i)
                if isinstance(node, DictConfig):
                    _apply(node, root, frozen)
        source, moves = _directive(value)
        if source is None:
            continue
        names = source.split(".")
        holder = _at(root, names[:-1], source)
        if moves and holder is not _MISSING and not isinstance(holder, DictConfig):  # NeMo Gym: AttributeError (str.pop)
            raise InvalidInputError("config inherits or copies from a path that does not exist", [FieldViolation(INHERIT_FROM, f"{source}: {names[-2]!r} is not a mapping")])
        if moves and holder is not _MISSING:
            holder.pop(names[-1], None)
        copied = _at(frozen, names, source)
        if holder is _MISSING or copied is _MISSING:
            level[key] = "???"
            continue
        if isinstance(value, DictConfig):  # the block's own keys over the copy
            copied = OmegaConf.merge(copied, value)
        level[key] = copied
        for k in deleting:  # a key to delete must be somewhere, the block's own or the copy's
            if k not in level[key]:
                raise InvalidInputError("config deletes a key it does not have", [FieldViolation(DELETE_KEY, f"{key}: no {k!r} in it or in {source}")])
            level[key].pop(k)


def _directive(value: Any) -> tuple[str | None, bool]:
    """(the path a value inherits or copies from, whether the source is removed)."""
    from omegaconf import DictConfig

    if isinstance(value, str):
        for prefix, moves in (("${inherit_from:", True), ("${copy:", False)):
            if value.startswith(prefix):
                return value.removeprefix(prefix).removesuffix("}"), moves
    elif isinstance(value, DictConfig) and (INHERIT_FROM in value or COPY in value):
        # both keys: NeMo Gym drops both, takes `_copy`'s path, and removes that source as `_inherit_from` does
        moves = INHERIT_FROM in value
        source = value.pop(INHERIT_FROM) if moves else None
        if COPY in value:
            source = value.pop(COPY)
        return str(source), moves
    return None, False


def _at(document: Any, names: list[str], source: str) -> Any:
    """The node at `names` (_MISSING when it or a parent is `???`); an error naming `source`
    when there is none."""
    from omegaconf import DictConfig, OmegaConf

    node = document
    for name in names:
        if not isinstance(node, DictConfig) or node._get_node(name) is None:
            raise InvalidInputError("config inherits or copies from a path that does not exist", [FieldViolation(INHERIT_FROM, f"{source}: no {name!r} there")])
        if OmegaConf.is_missing(node, name):
            return _MISSING
        node = node[name]
    return node


__all__ = ["apply_directives", "compose", "parse", "load_config_paths", "load_yaml", "resolve_under", "search_roots", "tree_root"]
