"""The porting rule as a tool: a NeMo Gym environment folder copied with `nemo_gym` rewritten to
`gym_metrics.nemo_gym` in its import lines, and nothing else changed. What it imports from the
rest of the source tree (`resources_servers.<other>...`, `responses_api_agents.<other>...`, and
the benchmarks, environment servers, environments and model servers of KINDS) is ported too,
into the target's tree, and named.

    python -m gym_metrics.nemo_gym.port resources_servers/<env> ported/resources_servers/<env>
"""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

_IMPORT = re.compile(r"^(\s*)(from|import)(\s+)nemo_gym(?=[\s.,]|$)", re.M)


def rewrite_imports(source: str) -> str:
    """`from nemo_gym...` / `import nemo_gym...` lines pointed at gym_metrics.nemo_gym; an
    `import nemo_gym` (bare) keeps its name with `as nemo_gym`."""
    def one(match: re.Match[str]) -> str:
        indent, keyword, space = match.groups()
        return f"{indent}{keyword}{space}gym_metrics.nemo_gym"

    out = _IMPORT.sub(one, source)
    out = re.sub(r"^(\s*)import gym_metrics\.nemo_gym(\s*(?:#.*)?)$", r"\1import gym_metrics.nemo_gym as nemo_gym\2", out, flags=re.M)
    # `import nemo_gym.prompt` binds `nemo_gym`: its rewrite binds `gym_metrics`, so the name is bound too
    return re.sub(r"^(\s*)import (gym_metrics\.nemo_gym(?:\.\w+)+)(\s*(?:#.*)?)$", r"\1import \2; import gym_metrics.nemo_gym as nemo_gym\3", out, flags=re.M)


def port_folder(source: Path, target: Path) -> list[Path]:
    """Copy `source` to `target`, rewriting the imports of every .py file; the files changed."""
    shutil.copytree(source, target, dirs_exist_ok=True)
    changed = []
    for path in sorted(target.rglob("*.py")):
        text = path.read_text()
        new = rewrite_imports(text)
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


KINDS = ("resources_servers", "responses_api_agents", "responses_api_models", "benchmarks", "environment_servers", "environments")
"""The folders of NeMo Gym's tree whose packages an environment, an agent or their tests import
(a benchmark's `prepare` module, an environment server, a model server)."""
_OTHER = re.compile(rf"^\s*(?:from|import)\s+({'|'.join(KINDS)})\.(\w+)", re.M)


_PATH = re.compile(rf"""(?:["']|:[ \t]+)[^"'\n]*?(?<![\w.-])({'|'.join(KINDS)})/([\w.-]+)""")
"""A path into the tree written in a string (`parents[1] / "benchmarks/aegis/config.yaml"`) or a
YAML value (`prompt_fpath: ../../benchmarks/hle/prompts/judge.txt`)."""


def referenced(folder: Path) -> set[tuple[str, str]]:
    """The (kind, name) folders of the tree the Python and YAML files of `folder` name in a
    string, by a path (a benchmark's config, a shared prompt file), itself aside: not imports,
    so a folder that is not there is no error."""
    found: set[tuple[str, str]] = set()
    for path in folder.rglob("*"):
        if path.suffix in (".py", ".yaml", ".yml") and path.is_file():
            found.update(_PATH.findall(path.read_text(errors="replace")))
    return found - {(folder.parent.name, folder.name)}


def imported_environments(folder: Path) -> set[str]:
    """The `resources_servers.<name>` environments the Python files of `folder` import."""
    return {name for kind, name in imported(folder) if kind == "resources_servers"}


def imported(folder: Path) -> set[tuple[str, str]]:
    """The (kind, name) of the environments and agents (`resources_servers.<name>`,
    `responses_api_agents.<name>`) the Python files of `folder` import, itself aside."""
    found: set[tuple[str, str]] = set()
    for path in folder.rglob("*.py"):
        found.update(_OTHER.findall(path.read_text(errors="replace")))
    return found - {(folder.parent.name, folder.name)}


def _beside(folder: Path, kind: str, name: str) -> Path:
    """Where `kind.name` lies for `folder`: in the tree it is in (`<root>/<kind>/<name>`), else beside it."""
    return folder.parent.parent / kind / name if folder.parent.name in KINDS else folder.parent / name


class PortError(Exception):
    """What stops a port, in one line."""


def port_environment(source: Path, target: Path) -> list[tuple[str, str | None, list[Path]]]:
    """Port `source` to `target`, then every folder of the tree it imports or names by a path,
    transitively, from the tree `source` is in to the tree `target` is in (an agent may import
    an environment's code, a test a benchmark's config): (name, what imported it or None, the
    files changed) in the order ported. PortError when an imported folder is missing, before
    anything is copied (one named only by a path is skipped)."""
    if not source.is_dir():
        raise PortError(f"{source} is not a folder")
    plan: list[tuple[Path, Path, str | None]] = []
    todo: list[tuple[Path, Path, str | None, str]] = [(source, target, None, "")]
    seen = {(source.parent.name, source.name)}
    while todo:
        src, dst, by, kind = todo.pop(0)
        if not src.is_dir():
            raise PortError(f"{by} imports {kind}.{src.name}, but {src} is not a folder: port it by hand or copy it beside {by}")
        plan.append((src, dst, by))
        for other_kind, other in sorted(imported(src) - seen):
            seen.add((other_kind, other))
            todo.append((_beside(src, other_kind, other), _beside(dst, other_kind, other), src.name, other_kind))
        for other_kind, other in sorted(referenced(src) - seen):
            if _beside(src, other_kind, other).is_dir():
                seen.add((other_kind, other))
                todo.append((_beside(src, other_kind, other), _beside(dst, other_kind, other), src.name, other_kind))
    return [(src.name, by, port_folder(src, dst)) for src, dst, by in plan]


PIP_NAMES = {"yaml": "pyyaml", "sklearn": "scikit-learn", "PIL": "pillow", "cv2": "opencv-python", "bs4": "beautifulsoup4",
             "dateutil": "python-dateutil", "dotenv": "python-dotenv", "docx": "python-docx", "pptx": "python-pptx"}  # fmt: skip
"""Import names whose package is named otherwise on PyPI."""


def _top_imports(path: Path) -> set[str]:
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def missing_modules(folders: Iterable[Path]) -> list[str]:
    """The top-level modules the ported folders' Python files import that this Python cannot
    find (NeMo Gym's own dependencies, such as ray and datasets, or an environment's
    requirements.txt), the standard library, the tree's packages and the folders' own modules
    aside."""
    folders = list(folders)
    local = {*KINDS, "gym_metrics", "nemo_gym"} | {p.stem for f in folders for p in f.iterdir()}
    found = {name for folder in folders for path in folder.rglob("*.py") for name in _top_imports(path)}
    return sorted(name for name in found - local if name not in sys.stdlib_module_names and importlib.util.find_spec(name) is None)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m gym_metrics.nemo_gym.port SOURCE_DIR TARGET_DIR", file=sys.stderr)
        return 2
    try:
        ported = port_environment(Path(args[0]), Path(args[1]))
    except (PortError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for name, by, changed in ported:
        why = f" (imported by {by})" if by else ""
        print(f"ported {name}{why}: {len(changed)} file(s) rewritten")
        for path in changed:
            print(f"  {path}")
    target = Path(args[1])
    missing = missing_modules(target.parent.parent / kind / name for kind in KINDS for name, _, _ in ported
                              if (target.parent.parent / kind / name).is_dir()) if target.parent.name in KINDS else missing_modules([target])  # fmt: skip
    if missing:
        wanted = " ".join(PIP_NAMES.get(name, name) for name in missing)
        print(f"note: imported but not installed here: {', '.join(missing)} (NeMo Gym's own dependencies or the "
              f"environment's requirements.txt): pip install {wanted}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
