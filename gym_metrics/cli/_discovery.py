"""Which modules of gym_metrics/cli are commands, in `gym-metrics --help` order.

A command is a private module here (`_name.py`) that defines `add_parsers(sub)` at top level
and sets `ORDER: int`, its place in `gym-metrics --help` (serve 10, collect 20, aggregate 30,
merge 40, export 45, health 48, compare 50, plan 60, dataset 65, evaluate 70, jobs 80, report 90, view 92, check-env 95; a new command takes a free
number). Every other private module (`_base`, `_export`, `_push`, ...) is a helper.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

_HERE = Path(__file__).parent
_DEFINES_ADD_PARSERS = re.compile(rb"^def add_parsers\(", re.MULTILINE)


def command_names() -> list[str]:
    """The command modules' names (`_serve`, ...), sorted, read from their source without
    importing a module: a helper may load much more (`_push` loads the collector), which
    `gym-metrics aggregate` must not pay for at start-up."""
    return sorted(
        path.stem
        for path in _HERE.glob("_*.py")
        if not path.stem.startswith("__") and _DEFINES_ADD_PARSERS.search(path.read_bytes())
    )


def command_modules() -> list[ModuleType]:
    """Each command module, imported, by `ORDER` (then name); a command without it is refused.
    `__import__`, not importlib.import_module: `python -X importtime` then lists them."""
    modules = [__import__(f"{__package__}.{name}", fromlist=["add_parsers"]) for name in command_names()]
    unordered = [module.__name__ for module in modules if not isinstance(getattr(module, "ORDER", None), int)]
    if unordered:
        raise TypeError(f"a command module sets ORDER: int, its place in gym-metrics --help: {', '.join(unordered)}")
    return sorted(modules, key=lambda module: (module.ORDER, module.__name__))
