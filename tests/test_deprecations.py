"""Every old name in gym_metrics._util.deprecated still works until its removal release: it
warns with a DeprecationWarning naming its replacement and 0.3.0, and is the same object as
the new name. The tables drive the tests, so a new entry is tested without a new test."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from gym_metrics._util import registry as registry_module
from gym_metrics._util.deprecated import (
    OLD_CLASS_ATTRIBUTES,
    OLD_ENTRY_POINT_GROUPS,
    OLD_MODULES,
    OLD_NAMES,
    REMOVAL,
)
from gym_metrics._util.registry import Registry

ALSO_FROM = {"gym_metrics.evaluate": ("gym_metrics.scorers",), "gym_metrics.paired": ("gym_metrics.statistics",)}
"""Old modules that re-export a second new module too."""
OLD = [(package, name, target) for package, names in OLD_NAMES.items() for name, target in names.items()]


def _new(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _forget(module: str) -> None:
    sys.modules.pop(module, None)
    parent, _, child = module.rpartition(".")
    if parent in sys.modules:
        sys.modules[parent].__dict__.pop(child, None)


def _message(old: str, new: str) -> str:
    return rf"{old}\b.* is deprecated; use {new.replace(':', '.')} \(removal in {REMOVAL}\)"


@pytest.mark.parametrize(("package", "name", "target"), OLD, ids=[f"{p}.{n}" for p, n, _ in OLD])
def test_old_name_warns_and_is_the_new_object(package: str, name: str, target: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the old module's own warning
        module = importlib.import_module(package)
    with pytest.warns(DeprecationWarning, match=_message(f"{package}.{name}", target)):
        old = getattr(module, name)
    assert old is _new(target)


@pytest.mark.parametrize(("old", "new"), sorted(OLD_MODULES.items()))
def test_old_module_warns_on_import_and_reexports_the_new_one(old: str, new: str) -> None:
    _forget(old)
    with pytest.warns(DeprecationWarning, match=_message(old, new)):
        module = importlib.import_module(old)
    homes = [importlib.import_module(m) for m in (new, *ALSO_FROM.get(old, ()))]
    with warnings.catch_warnings():  # an old module's old names are old names in the new home too
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in module.__all__:
            assert any(getattr(module, name) is getattr(home, name, None) for home in homes), name


@pytest.mark.parametrize(("old", "new"), sorted(OLD_ENTRY_POINT_GROUPS.items()))
def test_plugin_of_an_old_group_loads_with_a_warning(monkeypatch: pytest.MonkeyPatch, old: str, new: str) -> None:
    plugins = {
        new: [EntryPoint("both", "gym_metrics.scorers:Scorer", new)],
        old: [EntryPoint("both", "gym_metrics.errors:NotFoundError", old), EntryPoint("legacy", "gym_metrics.scorers:Scorer", old)],
    }
    monkeypatch.setattr(registry_module, "entry_points", lambda group: plugins.get(group, []))
    base = importlib.import_module("gym_metrics.scorers").Scorer
    reg: Registry[Any] = Registry("thing", base, (new,))
    assert reg.names() == ["both", "legacy"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert reg.get("both") is base  # the current group's plugin wins, silently
    with pytest.warns(DeprecationWarning, match=rf"entry-point group '{old}' \(plugin 'legacy'\) .*'{new}' \(removal in {REMOVAL}\)"):
        assert reg.get("legacy") is base


@pytest.mark.parametrize(("owner", "old", "new"), [(o, a, n) for o, attrs in OLD_CLASS_ATTRIBUTES.items() for a, n in attrs.items()])
def test_old_class_attribute_warns_when_a_subclass_sets_it(owner: str, old: str, new: str) -> None:
    base = _new(owner)
    with pytest.warns(DeprecationWarning, match=rf"{base.__name__}\.{old} \(set by Old\) .*{base.__name__}\.{new} \(removal in {REMOVAL}\)"):
        old_style = type("Old", (base,), {old: ["pass@2"]})
    assert old_style().listed_reducers() == ["pass@2"]  # still read


def test_built_in_entry_points_use_only_current_groups() -> None:
    from importlib.metadata import entry_points

    for old in OLD_ENTRY_POINT_GROUPS:
        assert [ep for ep in entry_points(group=old) if ep.value.startswith("gym_metrics")] == []


NEW_NAMES = """
import gym_metrics
from gym_metrics import *
import gym_metrics.environments, gym_metrics.evaluation, gym_metrics.jobs, gym_metrics.reducers, gym_metrics.sdk
import gym_metrics.scorers, gym_metrics.scorers.judge, gym_metrics.scorers.remote, gym_metrics.scorers.tool_calls
for name in gym_metrics.__all__:
    getattr(gym_metrics, name)
gym_metrics.get_reducer("pass@2"); gym_metrics.get_scorer("tool_call_accuracy"); gym_metrics.scorers.SCORERS.get("remote")
class Env(gym_metrics.SimpleResourcesServer):
    reducers = ["pass@1"]
"""


def test_new_names_raise_no_deprecation_warning() -> None:
    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", NEW_NAMES], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_public_names_hold_no_old_name() -> None:
    import gym_metrics

    assert not set(gym_metrics.__all__) & set(OLD_NAMES["gym_metrics"])
    assert len(gym_metrics.__all__) == len(set(gym_metrics.__all__))
