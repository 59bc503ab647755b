"""What the make_nemo_*_reference scripts share: writing the reference they recorded (or with
--check comparing it with the one committed), and loading a Python file by its path."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def write_or_check(path: Path, text: str, check: bool) -> int:
    if check:
        same = path.exists() and path.read_text(encoding="utf-8") == text
        print("same" if same else f"differs from {path}")
        return 0 if same else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


def load_module(path: Path, name: str) -> ModuleType:
    """A Python file as a module, by its path (a test environment's app.py, _nemo_side.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
