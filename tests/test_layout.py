"""House rules that a test can hold: grpc only in the transport, no private names across
packages (DESIGN.md, "Rules of the house")."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gym_metrics"
GRPC_MODULES = ("grpc", "grpc_health", "grpc_reflection", "grpc_status")
GRPC_HOMES = ("_transport", "v1")


@functools.lru_cache(maxsize=1)
def _modules() -> tuple[tuple[str, ast.Module], ...]:
    """Every module of the package, parsed once for all the tests (about 2 s; nothing here
    changes the trees)."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out.append((name, ast.parse(path.read_text(), str(path))))
    return tuple(out)


def _imports(tree: ast.Module, module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import, relative ones resolved."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, [], node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: -node.level] if not module.endswith("__init__") else module.split(".")
                base = ".".join([*parts, *([base] if base else [])])
            found.append((base, [alias.name for alias in node.names], node.lineno))
    return found


def _owner(module: str) -> str:
    """The package a module belongs to: gym_metrics.<subpackage>, or the root for the
    root's own modules (shared helpers such as gym_metrics._util.unique)."""
    parts = module.split(".")
    if len(parts) >= 2 and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return parts[0]


@pytest.mark.slow
def test_grpc_is_imported_only_by_the_transport() -> None:
    """The source's own structure, the same on every Python: marked slow, so it runs on the
    default Python only (CI's time bound)."""
    leaks = [
        f"{module}:{line} imports {imported}"
        for module, tree in _modules()
        if module.split(".")[1:2] not in ([h] for h in GRPC_HOMES)
        for imported, _, line in _imports(tree, module)
        if imported.split(".")[0] in GRPC_MODULES
    ]
    assert not leaks, "grpc outside gym_metrics/_transport and v1:\n" + "\n".join(leaks)


@pytest.mark.slow
def test_no_module_imports_a_private_name_of_another_package() -> None:
    """The source's own structure, the same on every Python: marked slow, so it runs on the
    default Python only (CI's time bound)."""
    leaks = []
    for module, tree in _modules():
        mine = _owner(module)
        for imported, names, line in _imports(tree, module):
            if not imported.startswith("gym_metrics"):
                continue
            theirs = _owner(imported)
            if theirs == mine or theirs == "gym_metrics":  # own package, or the root's shared helpers
                continue
            # Another package's __init__ is its public face (a private package such as
            # _transport included); its private modules and names are not.
            private_module = any(p.startswith("_") for p in imported.split(".")[2:])
            private_names = [n for n in names if n.startswith("_") and n != "__version__"]
            if private_module or private_names:
                what = imported + (f" ({', '.join(private_names)})" if private_names else "")
                leaks.append(f"{module}:{line} imports {what}")
    assert not leaks, "private names used across packages:\n" + "\n".join(leaks)


def test_the_client_is_public_and_importing_the_package_loads_no_grpc() -> None:
    code = (
        "import sys, gym_metrics; assert 'grpc' not in sys.modules, 'grpc loaded by import gym_metrics'; "
        "from gym_metrics import ResourcesClient, collect_async, ServerConfig, start_server; "
        "assert ResourcesClient.__module__.startswith('gym_metrics._transport')"
    )
    _runs_clean(code)


def test_the_readme_demo_runs_without_the_openai_sdk() -> None:
    """`pip install .` has no openai (the NeMo Gym port and the judges need it, as an extra): the
    collector and the demo's command must import without it (a NeMo Gym module imported by the
    collector at its top once broke the README's first command)."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'openai': raise ImportError('openai is not installed')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import gym_metrics.collector._run, gym_metrics.collector._episodes, gym_metrics.cli._demo\n"
    )
    _runs_clean(code)


# The layers, top to bottom (docs/contributing.md draws them): a module may import its own
# layer and the layers below it, never one above. A package is one layer; the transport is
# three faces over its shared wire modules. Old-name modules at the root (they warn) sit on
# top with the package root's lazy exports.
LAYERS = (
    "gym_metrics",
    "old names",
    "cli",
    "ray",
    "view",
    "_transport.jobs",
    "testing",
    "_transport.server",
    "integrations",
    "sdk",
    "jobs",
    "evaluation",
    "collector",
    "_transport.client",
    "_transport",
    "report",
    "exporters",
    "ecosystems",
    "nemo_gym",
    "environments",
    "sandbox",
    "health",
    "recording",
    "targets",
    "scorers",
    "compare",
    "reducers",
    "aggregate",
    "rollouts",
    "statistics",
    "_util",
    "models",
    "errors",
    "v1",
)
ROOT_FILES = {"__init__.py", "errors.py", "models.py", "py.typed"}
TRANSPORT_FACES = ("client", "server", "jobs")


def _old_modules() -> set[str]:
    from gym_metrics._util.deprecated import OLD_MODULES

    return set(OLD_MODULES)


def _layer(module: str, old: set[str]) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "gym_metrics"
    if module in old:
        return "old names"
    if parts[1] == "_transport":
        return f"_transport.{parts[2]}" if len(parts) > 2 and parts[2] in TRANSPORT_FACES else "_transport"
    return parts[1]


@functools.lru_cache(maxsize=1)
def _edges() -> dict[str, frozenset[str]]:
    """Every import between the package's modules, inside functions and under TYPE_CHECKING
    too (a design dependency either way); `from a import b` names module a.b when it is one.
    (Once for both tests that read it.)"""
    modules = dict(_modules())
    edges: dict[str, frozenset[str]] = {}
    for module, tree in modules.items():
        found = set()
        for imported, names, _ in _imports(tree, module):
            if not imported.startswith("gym_metrics"):
                continue
            for name in names or [""]:
                sub = f"{imported}.{name}" if name else imported
                target = sub if sub in modules else imported
                while target not in modules and "." in target:
                    target = target.rpartition(".")[0]
                if target in modules and target != module:
                    found.add(target)
        edges[module] = frozenset(found)
    return edges


@pytest.mark.slow
def test_no_import_circles_counting_every_import() -> None:
    """The source's own structure, the same on every Python: marked slow, so it runs on the
    default Python only (CI's time bound)."""
    edges = _edges()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert not circles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.slow
def test_imports_point_down_the_layers() -> None:
    """The source's own structure, the same on every Python: marked slow, so it runs on the
    default Python only (CI's time bound)."""
    old = _old_modules()
    rank = {name: i for i, name in enumerate(LAYERS)}
    upward = []
    for module, targets in _edges().items():
        mine = _layer(module, old)
        assert mine in rank, f"{module}: its package {mine!r} is not in LAYERS (add it where it belongs)"
        for target in targets:
            theirs = _layer(target, old)
            if theirs != mine and rank[theirs] < rank[mine]:
                upward.append(f"{module} ({mine}) imports {target} ({theirs})")
    assert not upward, "imports running up the layers:\n" + "\n".join(sorted(upward))


def test_the_package_root_holds_only_the_target_layout() -> None:
    old = {name.rpartition(".")[2] + ".py" for name in _old_modules()}
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    files = {p.name for p in PACKAGE.iterdir() if p.is_file() and not p.name.endswith((".pyc", ".so"))}
    assert files - ROOT_FILES - old == set(), "root modules outside the layout (DESIGN.md)"
    assert packages - {layer.partition(".")[0] for layer in LAYERS} == set(), "packages missing from LAYERS"


def test_no_class_name_is_defined_twice() -> None:
    """One name per concept (issue 38): a class name is defined once under gym_metrics/, the
    mirrors of other projects' names (nemo_gym/, sdk/) and the generated v1/ aside."""
    from collections import defaultdict

    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] in ("nemo_gym", "sdk", "v1"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(str(path.relative_to(PACKAGE)))
    assert not {name: paths for name, paths in where.items() if len(paths) > 1}


def test_a_collect_that_records_nothing_loads_no_recording_models() -> None:
    """The trajectory and conversation-item models (pydantic models by the dozen) load on first
    use of a recording name; every public name of gym_metrics.recording still resolves."""
    code = (
        "import sys, gym_metrics.collector, gym_metrics.cli._collect\n"
        "heavy = [m for m in ('gym_metrics.recording._conversation_items', 'gym_metrics.recording._trajectory_schema', "
        "'gym_metrics.recording._items', 'gym_metrics.recording._atif') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "import gym_metrics.recording as r\n"
        "missing = [n for n in r.__all__ if getattr(r, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert 'gym_metrics.recording._conversation_items' in sys.modules\n"
        "try:\n    r.no_such_name\nexcept AttributeError as e:\n    assert 'no_such_name' in str(e)\nelse:\n    raise SystemExit('no AttributeError')\n"
    )
    _runs_clean(code)


def _runs_clean(code: str) -> None:
    """`code` in a fresh interpreter (what an import loads is seen only there) exits 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
