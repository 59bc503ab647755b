"""The one typed registry (gym_metrics/_util/registry.py): register by name, find by name with a
NotFoundError listing the names, families, entry points (current and old group names), and every
built-in registered through the entry points pyproject.toml declares."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, ClassVar

import pytest

import gym_metrics
import gym_metrics._util.registry as registry_module
from gym_metrics._util.registry import Registry
from gym_metrics.errors import NotFoundError
from gym_metrics.reducers import REDUCERS
from gym_metrics.scorers import SCORERS

ROOT = Path(__file__).resolve().parents[1]
tomllib = pytest.importorskip("tomllib", reason="Python < 3.11 has no tomllib")


class Base:
    name: ClassVar[str] = ""
    k: ClassVar[int] = 0


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, *eps: EntryPoint) -> None:
    monkeypatch.setattr(registry_module, "entry_points", lambda group: [ep for ep in eps if ep.group == group])


def test_register_find_get_and_a_clear_not_found() -> None:
    reg: Registry[Base] = Registry("thing", Base, ("test.things",), named=True)

    @reg.register("one")
    class One(Base):
        pass

    assert reg.get("one") is One and One.name == "one" and reg.find("two") is None
    with pytest.raises(NotFoundError, match=r"unknown thing 'two'; known: one$"):
        reg.get("two")
    with pytest.raises(TypeError, match=r"@register_thing\('x'\) needs a Base subclass"):
        reg.register("x")(int)
    with pytest.raises(ValueError, match="registered as"):

        @reg.register("b")
        class Named(Base):
            name = "a"


def test_families_make_one_class_per_k() -> None:
    reg: Registry[Base] = Registry("thing", Base, ("test.things",), named=True, families=True)

    @reg.register("top{k}")
    class Top(Base):
        pass

    three = reg.get("top3")
    assert issubclass(three, Top) and (three.name, three.k) == ("top3", 3) and reg.get("top3") is three
    assert reg.find("top0") is None and reg.find("topx") is None and reg.names() == ["top{k}"]


def test_entry_points_of_every_group_are_found_and_loaded_on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_entry_points(
        monkeypatch,
        EntryPoint("acc", "gym_metrics.scorers.tool_calls:ToolCallAccuracyScorer", "test.new"),
        EntryPoint("old_name", "gym_metrics.scorers.tool_calls:ToolCallingScorer", "test.old"),
        EntryPoint("broken", "no_such_module_anywhere:X", "test.new"),
        EntryPoint("not_a_class", "gym_metrics.errors:FieldViolation", "test.new"),
    )
    reg: Registry[Any] = Registry("scorer", gym_metrics.Scorer, ("test.new", "test.old"))
    assert reg.names() == ["acc", "broken", "not_a_class", "old_name"]  # listed without loading
    assert reg.get("acc").__name__ == "ToolCallAccuracyScorer"
    with pytest.warns(DeprecationWarning, match="'test.old' .*'test.new' \\(removal in 0.3.0\\)"):
        assert reg.get("old_name").__name__ == "ToolCallingScorer"  # an older group: loads, warns
    with pytest.raises(NotFoundError, match="scorer plugin 'broken' .* failed to load"):
        reg.get("broken")
    with pytest.raises(NotFoundError, match="neither a Scorer subclass nor a module"):
        reg.get("not_a_class")
    with pytest.raises(NotFoundError, match="unknown scorer 'nope'"):
        reg.get("nope")


def test_snapshot_and_restore() -> None:
    reg: Registry[Base] = Registry("thing", Base, ("test.things",))
    before = reg.snapshot()
    reg.register("one")(type("One", (Base,), {}))
    reg.restore(before)
    assert reg.find("one") is None and reg.snapshot() == before


def _import_all(package: str) -> None:
    module = importlib.import_module(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        if ".tests" not in info.name:
            importlib.import_module(info.name)


@pytest.mark.parametrize(
    ("registry", "group", "packages"),
    [
        (SCORERS, "gym_metrics.scorers", ["gym_metrics.scorers"]),
        (REDUCERS, "gym_metrics.reducers", ["gym_metrics.reducers"]),
    ],
)  # (built-in environments are found by their folder: tests/environments/test_registry.py)
def test_every_builtin_is_declared_as_an_entry_point(registry: Registry[Any], group: str, packages: list[str]) -> None:
    """A built-in registered in code but missing from pyproject.toml would be found only after
    its module happened to be imported: every one is declared, under its registered name."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][group]
    for package in packages:
        _import_all(package)
    registered = {
        name: cls
        for name, cls in {**registry.snapshot().classes, **{p: f.cls for p, f in registry.snapshot().families.items()}}.items()
        if cls.__module__.split(".")[0] in ("gym_metrics", "gym_metrics_servers")
    }
    assert sorted(registered) == sorted(declared)
    for name, target in declared.items():
        module, _, attr = target.partition(":")
        assert getattr(sys.modules[module], attr) is registered[name], name
