"""The porting rule as a tool: a NeMo Gym environment folder copied with `nemo_gym` rewritten to
`gym_metrics.nemo_gym` in its import lines, and nothing else changed.

    python -m gym_metrics.nemo_gym.port resources_servers/<env> ported/<env>
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


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m gym_metrics.nemo_gym.port SOURCE_DIR TARGET_DIR", file=sys.stderr)
        return 2
    for path in port_folder(Path(args[0]), Path(args[1])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
