"""One exit-code table (gym_metrics.errors.ExitCode, DESIGN "Command-line conventions") used by
every error that ends a command with a code, and commands found by the CLI itself: a private
module of gym_metrics/cli defining `add_parsers(sub)` and `ORDER`."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import gym_metrics
from gym_metrics.cli import _discovery, _parser
from gym_metrics.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "gym_metrics"
CLI = PACKAGE / "cli"
COMMANDS = ["serve", "collect", "demo", "aggregate", "merge", "export", "health", "compare", "plan", "dataset", "evaluate", "jobs", "report", "view", "check-env"]
"""`gym-metrics --help` lists them in this order (collect's module adds demo)."""
COMMAND_MODULES = ["_aggregate", "_check_env", "_collect", "_compare", "_dataset", "_evaluate", "_export_trajectories", "_health", "_jobs", "_merge", "_plan", "_report", "_serve", "_view"]
ERRORS_WITH_CODES = {
    "ServerUnavailableError": ExitCode.UNAVAILABLE,
    "ServerUnreachableError": ExitCode.UNAVAILABLE,
    "JobWaitTimeout": ExitCode.UNAVAILABLE,
    "JobNotFinishedError": ExitCode.BAD_INPUT,
    "PrometheusMissingError": ExitCode.BAD_INPUT,
    "ExporterMissingError": ExitCode.BAD_INPUT,
    "ExportError": ExitCode.FAILED,
    "PushgatewayError": ExitCode.FAILED,
    "ReasoningGymMissingError": ExitCode.BAD_INPUT,
}
"""Errors that set their own code (the walk below must find at least these, with these codes)."""


def test_the_table_has_the_documented_numbers() -> None:
    assert {code.name: int(code) for code in ExitCode} == {
        "OK": 0, "FAILED": 1, "BAD_INPUT": 2, "ALL_FAILED": 3, "UNAVAILABLE": 4,
    }  # fmt: skip
    assert ExitCode.INCONCLUSIVE is ExitCode.ALL_FAILED  # one code, two readings (DESIGN)
    documented = re.findall(r"^\| (\d) \| ", (ROOT / "docs" / "commands.md").read_text(), re.MULTILINE)
    assert [int(row) for row in documented] == [int(code) for code in ExitCode]


def _package_modules() -> list[ModuleType]:
    """Every importable module of gym_metrics; one needing a missing optional extra is skipped."""
    modules = []
    for info in pkgutil.walk_packages(gym_metrics.__path__, "gym_metrics."):
        if info.name.endswith("__main__"):
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # the old names' modules warn
                modules.append(importlib.import_module(info.name))
        except ImportError as exc:
            if (exc.name or "").startswith("gym_metrics"):
                raise
    return modules


def test_every_error_with_an_exit_code_names_a_member_of_the_table() -> None:
    found = {}
    for module in _package_modules():
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException) and "exit_code" in vars(cls):
                found[name] = vars(cls)["exit_code"]
    not_members = {name: code for name, code in found.items() if not isinstance(code, ExitCode)}
    assert not not_members, f"exit_code set to a bare number, not an ExitCode member: {not_members}"
    assert ERRORS_WITH_CODES.items() <= found.items()


def test_no_module_spells_an_exit_code_as_a_number() -> None:
    """By source, so a module the walk cannot import (an optional extra) is held too."""
    bare = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                    if (name == "exit_code" or name.startswith("EXIT_")) and isinstance(node.value.value, int):
                        bare.append(f"{path.relative_to(ROOT)}:{node.lineno} {name} = {node.value.value}")
    assert not bare, "use gym_metrics.errors.ExitCode:\n" + "\n".join(bare)


def test_the_cli_finds_every_command_in_the_documented_order() -> None:
    assert _discovery.command_names() == COMMAND_MODULES
    sub = next(a for a in _parser()._actions if a.dest == "command")
    assert list(sub.choices) == COMMANDS  # type: ignore[arg-type]


def test_the_commands_are_the_ones_the_readme_documents() -> None:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    documented = {m for m in re.findall(r"^gym-metrics (\S+)", block, re.MULTILINE) if not m.startswith("-")}
    assert documented == set(COMMANDS)


def test_a_private_cli_module_is_a_command_exactly_when_it_defines_add_parsers() -> None:
    """The discovery reads sources (a helper may be costly to import); importing each module
    says the same, and every command has its own place."""
    names = sorted(p.stem for p in CLI.glob("_*.py") if not p.stem.startswith("__"))
    with_add_parsers = [n for n in names if callable(getattr(importlib.import_module(f"gym_metrics.cli.{n}"), "add_parsers", None))]
    assert with_add_parsers == _discovery.command_names()
    orders = [module.ORDER for module in _discovery.command_modules()]
    assert orders == sorted(set(orders)), "two commands share an ORDER"


def test_a_command_without_an_order_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_discovery, "command_names", lambda: ["_serve", "_base"])
    with pytest.raises(TypeError, match="gym_metrics.cli._base"):
        _discovery.command_modules()


def test_building_the_parser_loads_neither_grpc_nor_pydantic() -> None:
    """What every command pays before it runs (`gym-metrics aggregate` must start fast)."""
    code = (
        "import sys; from gym_metrics.cli import _parser; _parser(); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'pydantic')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
