"""House rules that a test can hold: grpc only in the transport, no private names across
packages (DESIGN.md, "Rules of the house")."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gym_metrics"
GRPC_MODULES = ("grpc", "grpc_health", "grpc_reflection", "grpc_status")
GRPC_HOMES = ("_transport", "v1")


def _modules() -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out.append((name, ast.parse(path.read_text(), str(path))))
    return out


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


def test_grpc_is_imported_only_by_the_transport() -> None:
    leaks = [
        f"{module}:{line} imports {imported}"
        for module, tree in _modules()
        if module.split(".")[1:2] not in ([h] for h in GRPC_HOMES)
        for imported, _, line in _imports(tree, module)
        if imported.split(".")[0] in GRPC_MODULES
    ]
    assert not leaks, "grpc outside gym_metrics/_transport and v1:\n" + "\n".join(leaks)


def test_no_module_imports_a_private_name_of_another_package() -> None:
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
    import subprocess
    import sys

    code = (
        "import sys, gym_metrics; assert 'grpc' not in sys.modules, 'grpc loaded by import gym_metrics'; "
        "from gym_metrics import ResourcesClient, collect_async, ServerConfig, start_server; "
        "assert ResourcesClient.__module__.startswith('gym_metrics._transport')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
