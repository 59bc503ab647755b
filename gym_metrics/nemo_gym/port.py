"""The porting rule as a tool: a NeMo Gym environment folder copied with `nemo_gym` rewritten to
`gym_metrics.nemo_gym` in its import lines, and nothing else changed. The environments it
imports (`resources_servers.<other>...`, beside it in the source tree) are ported too, beside
the target, and named.

    python -m gym_metrics.nemo_gym.port resources_servers/<env> ported/resources_servers/<env>
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

_IMPORT = re.compile(r"^(\s*)(from|import)(\s+)nemo_gym(?=[\s.,]|$)", re.M)


def rewrite_imports(source: str) -> str:
    """`from nemo_gym...` / `import nemo_gym...` lines pointed at gym_metrics.nemo_gym; an
    `import nemo_gym` (bare) keeps its name with `as nemo_gym`."""
    def one(match: re.Match[str]) -> str:
        indent, keyword, space = match.groups()
        return f"{indent}{keyword}{space}gym_metrics.nemo_gym"

    out = _IMPORT.sub(one, source)
    return re.sub(r"^(\s*)import gym_metrics\.nemo_gym(\s*)$", r"\1import gym_metrics.nemo_gym as nemo_gym\2", out, flags=re.M)


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


_OTHER_ENV = re.compile(r"^\s*(?:from|import)\s+resources_servers\.(\w+)", re.M)


def imported_environments(folder: Path) -> set[str]:
    """The `resources_servers.<name>` environments the Python files of `folder` import."""
    found: set[str] = set()
    for path in folder.rglob("*.py"):
        found.update(_OTHER_ENV.findall(path.read_text(errors="replace")))
    return found - {folder.name}


class PortError(Exception):
    """What stops a port, in one line."""


def port_environment(source: Path, target: Path) -> list[tuple[str, str | None, list[Path]]]:
    """Port `source` to `target`, then every environment it imports, transitively, from the
    folder beside `source` to the folder beside `target`: (name, the environment that imported
    it or None, the files changed) in the order ported. PortError when a folder is missing."""
    if not source.is_dir():
        raise PortError(f"{source} is not a folder")
    done: list[tuple[str, str | None, list[Path]]] = []
    todo: list[tuple[Path, Path, str | None]] = [(source, target, None)]
    seen = {source.name}
    while todo:
        src, dst, by = todo.pop(0)
        if not src.is_dir():
            raise PortError(f"{by} imports resources_servers.{src.name}, but {src} is not a folder: port it by hand or copy it beside {by}")
        done.append((src.name, by, port_folder(src, dst)))
        for other in sorted(imported_environments(src) - seen):
            seen.add(other)
            todo.append((src.parent / other, dst.parent / other, src.name))
    return done


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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
