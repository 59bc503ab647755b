"""Environments by name: `@register_server`, `module:Class` or `path/to/app.py:Class`.

Registering is one place: a built-in environment's `@register_server("name")` in
`gym_metrics_servers/<name>/app.py` (found by its folder, imported when first asked for); a
third-party package's entry point in the `gym_metrics.servers` group naming its class (or a
script's `@register_server`, once imported).

A file is loaded with its folder first on the import path (NeMo Gym environments import their
sibling modules, as `python app.py` would let them); a syntax or import error in it is an
InvalidInputError naming the file and line, not a crash."""

from __future__ import annotations

import functools
import importlib
import os
import importlib.util
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gym_metrics._util.registry import Registry
from gym_metrics.errors import GymMetricsError, InvalidInputError, NotFoundError
from gym_metrics.environments._server import SimpleResourcesServer

ENTRY_POINT_GROUP = "gym_metrics.servers"
ENVIRONMENTS: Registry[SimpleResourcesServer] = Registry("server", SimpleResourcesServer, (ENTRY_POINT_GROUP,))
S = TypeVar("S", bound=type[SimpleResourcesServer])
BUILT_INS = "gym_metrics_servers"
"""The package of the built-in environments: `<name>/app.py` registers `name`."""


_NAMED = "_gm_registered_as"
"""Set on a class `register_server` registered: a built-in's module imported once registers it
again by this when a registry snapshot was restored (tests)."""


def register_server(name: str) -> Callable[[S], S]:
    """Class decorator: make an environment servable as `gym-metrics serve NAME`."""

    def deco(cls: S) -> S:
        ENVIRONMENTS.add(name, cls)
        setattr(cls, _NAMED, name)
        return cls

    return deco


def registered_servers() -> list[str]:
    """Every name `resolve_server` accepts without a module path."""
    for name in _built_in_folders():
        _import_built_in(name)
    return ENVIRONMENTS.names()


def resolve_server(target: str, adapt: Callable[[object], type[SimpleResourcesServer] | None] | None = None) -> type[SimpleResourcesServer]:
    """The environment class named by `target` (see module docstring); `adapt` makes one of
    what `module:Name` names when that is not an environment class (an OpenEnv Environment)."""
    found = ENVIRONMENTS.find(target)
    if found is None and _import_built_in(target):
        found = ENVIRONMENTS.find(target)
    if found is not None:
        return found
    if ":" not in target:
        _refuse_missing_class(target)
        raise NotFoundError(
            f"unknown environment {target!r}: use a registered name ({', '.join(registered_servers()) or 'none'}), "
            "module:Class or path/app.py:Class"
        )
    module_part, _, attr = target.rpartition(":")
    if module_part.endswith(".py") or "/" in module_part:
        module = load_module_file(Path(module_part))
    else:
        try:
            module = importlib.import_module(module_part)
        except GymMetricsError:  # the module's own, clear error (a bad setting it reads)
            raise
        except ImportError as exc:
            if exc.name is not None and (module_part + ".").startswith(exc.name + "."):  # the module itself is missing
                raise NotFoundError(f"cannot import {module_part!r}: {exc}") from exc
            raise _load_error(module_part, exc) from None
        except (Exception, SystemExit) as exc:  # a syntax error, any other raised while it runs, or a script's exit
            raise _load_error(module_part, exc) from None
    try:
        found_obj = getattr(module, attr)
    except AttributeError:
        raise NotFoundError(f"{module_part!r} has no attribute {attr!r}") from None
    adapted = None if adapt is None or isinstance(found_obj, type) and issubclass(found_obj, SimpleResourcesServer) else adapt(found_obj)
    return adapted if adapted is not None else _check(found_obj, target)


@functools.lru_cache(maxsize=1)
def _built_in_folders() -> list[str]:
    """The folders of gym_metrics_servers/ that hold an app.py (looked up once a process)."""
    spec = importlib.util.find_spec(BUILT_INS)
    if spec is None or not spec.submodule_search_locations:
        return []
    return sorted({p.parent.name for root in spec.submodule_search_locations for p in Path(root).glob("*/app.py")})


def _import_built_in(name: str) -> bool:
    """Import gym_metrics_servers/<name>/app.py (its @register_server registers it) when that
    folder exists; whether it did."""
    if not name.isidentifier() or name not in _built_in_folders():
        return False
    module = f"{BUILT_INS}.{name}.app"
    try:
        loaded = importlib.import_module(module)
    except GymMetricsError:  # the module's own, clear error (a bad setting it reads)
        raise
    except Exception as exc:  # a syntax or import error, or any other raised while it runs
        raise _load_error(module, exc) from None
    if ENVIRONMENTS.find(name) is None:  # imported before, its registration since undone
        for obj in vars(loaded).values():
            if isinstance(obj, type) and obj.__dict__.get(_NAMED) == name:
                ENVIRONMENTS.add(name, obj)
    return True


def _refuse_missing_class(target: str) -> None:
    """`path/app.py` or `package.module` without `:Class`: say the class is missing (and which
    environments the file or module defines), rather than "unknown environment"."""
    if target.endswith(".py") or "/" in target or "\\" in target:
        module = load_module_file(Path(target))
    elif "." in target and _importable(target):
        try:
            module = importlib.import_module(target)
        except GymMetricsError:
            raise
        except (Exception, SystemExit) as exc:  # a syntax or import error, any other raised while it runs, or a script's exit
            raise _load_error(target, exc) from None
    else:
        return
    found = sorted(
        name
        for name, obj in vars(module).items()
        if isinstance(obj, type) and issubclass(obj, SimpleResourcesServer) and obj is not SimpleResourcesServer
    )
    found = [n for n in found if getattr(module, n).__module__ == module.__name__] or found  # its own first
    hint = f" (it defines {', '.join(found)})" if found else ""
    example = found[0] if found else "ClassName"
    raise NotFoundError(f"{target!r} names no class: write {target}:{example}{hint}")


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def load_module_file(path: Path) -> Any:
    """A Python file loaded as a module, its folder first on the import path (its sibling
    modules import as beside `python app.py`); an import or syntax error names the file and line."""
    if not path.is_file():
        raise NotFoundError(f"no such file: {path}")
    resolved = path.resolve()
    for module in list(sys.modules.values()):  # already imported (e.g. an installed env): reuse it,
        file = getattr(module, "__file__", None)  # or its @register_server would run twice
        if file and Path(file).resolve() == resolved:
            return module
    name = f"_gym_metrics_env_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # a name Python does not load as a module
        raise NotFoundError(f"cannot load {path}: not a Python file (give path/app.py:Class)")
    module = importlib.util.module_from_spec(spec)
    folder = str(resolved.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # its sibling modules import as they would beside `python app.py`
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # a syntax or import error, any other raised while it runs, or a script's exit
        del sys.modules[name]
        if isinstance(exc, GymMetricsError) or not isinstance(exc, (Exception, SystemExit)):
            raise
        raise _load_error(str(path), exc) from None
    return module


_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep


def _load_error(what: str, exc: Exception | SystemExit) -> InvalidInputError:
    """The error of an environment that does not load, as `file:line: SyntaxError: ...` (the
    line of the user's code where it happened: the file's own, or the one importing a module
    that is missing), for a one-line message with exit 2."""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}:{exc.lineno}" if exc.lineno else exc.filename
        reason = exc.msg
    else:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_import_machinery(f.filename)]
        theirs = [f for f in frames if not f.filename.startswith(_PACKAGE)]  # a check of ours that refused their code: name their line
        last = theirs[-1] if theirs else frames[-1] if frames else None
        where = f"{last.filename}:{last.lineno}" if last is not None else what
        reason = str(exc)
    if isinstance(exc, SystemExit):
        reason = f"{exc.code} (it exits when imported: a script's own part goes under `if __name__ == '__main__':`)"
    named = "" if where.startswith(what) else f" {what}"
    return InvalidInputError(f"cannot load the environment{named}: {where}: {type(exc).__name__}: {reason}")


def _is_import_machinery(filename: str) -> bool:
    return filename.startswith("<frozen ") or filename == __file__


def _check(obj: object, target: str) -> type[SimpleResourcesServer]:
    if isinstance(obj, type) and issubclass(obj, SimpleResourcesServer):
        return obj
    raise NotFoundError(f"{target!r} is not an environment class (a SimpleResourcesServer subclass, or an OpenEnv Environment)")
