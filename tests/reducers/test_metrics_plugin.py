"""A separately installed package adds reward reducers through the `gym_metrics.reducers`
entry-point group (or its old name, `gym_metrics.metrics`, with a DeprecationWarning): built here, pip-installed into the
running environment (offline), used by name, uninstalled afterwards."""

from __future__ import annotations

import importlib
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gym_metrics.reducers import ENTRY_POINT_GROUP, REDUCERS, get_reducer, reducer_names

OLD_GROUP = "gym_metrics.metrics"

PLUGIN = '''
"""A reducer plugin: one plain reducer (declared under the group's old name) and one family."""
from typing import ClassVar

from gym_metrics.reducers import Reducer


class LastSampleMean(Reducer):
    """Mean over non-empty tasks of each task's last reward."""

    def compute(self, task_rewards):
        last = [t[-1] for t in task_rewards if len(t)]
        return float(sum(last) / len(last)) if last else 0.0


class AtLeastKPasses(Reducer):
    """Fraction of tasks with at least k passing samples."""

    k: ClassVar[int]

    def compute(self, task_rewards):
        tasks = list(task_rewards)
        return sum(sum(r >= 1.0 for r in t) >= self.k for t in tasks) / len(tasks) if tasks else 0.0
'''


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture
def plugin(tmp_path: Path) -> Iterator[str]:
    """Install the plugin under unique names (so concurrent test runs cannot collide); yield
    its tag; uninstall it and forget its reducers at teardown, also when the test fails."""
    if _pip("--version").returncode != 0:
        pytest.skip("pip is not available in this environment")
    tag = uuid.uuid4().hex[:10]
    module, dist = f"gm_plugin_{tag}", f"gym-metrics-test-plugin-{tag}"
    src = tmp_path / "plugin"
    src.mkdir()
    (src / f"{module}.py").write_text(PLUGIN)
    (src / "pyproject.toml").write_text(
        f"""
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.0.1"

[project.entry-points."{OLD_GROUP}"]
"last_mean_{tag}" = "{module}:LastSampleMean"

[project.entry-points."{ENTRY_POINT_GROUP}"]
"at_least_{{k}}_{tag}" = "{module}:AtLeastKPasses"

[tool.setuptools]
py-modules = ["{module}"]
"""
    )
    before = REDUCERS.snapshot()
    installed = _pip("install", "--no-deps", "--no-build-isolation", "--no-index", "--no-cache-dir", "-q", str(src))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    importlib.invalidate_caches()
    try:
        yield tag
    finally:
        removed = _pip("uninstall", "-y", "-q", dist)
        sys.modules.pop(module, None)
        importlib.invalidate_caches()
        REDUCERS.restore(before)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert not [n for n in reducer_names() if n.endswith(tag)]  # nothing left behind


def test_installed_plugin_reducers_are_found_by_name(plugin: str) -> None:
    tag = plugin
    assert f"last_mean_{tag}" in reducer_names()  # listed before anything is loaded
    assert f"at_least_{{k}}_{tag}" in reducer_names()

    with pytest.warns(DeprecationWarning, match=r"'gym_metrics\.metrics' .*'gym_metrics\.reducers' \(removal in 0\.3\.0\)"):
        last_mean = get_reducer(f"last_mean_{tag}")  # found only under the old group
    assert last_mean.name == f"last_mean_{tag}"
    assert last_mean.compute([[0, 1], [1, 0], []]) == 0.5

    at_least_2 = get_reducer(f"at_least_2_{tag}")
    assert at_least_2.name == f"at_least_2_{tag}"
    assert at_least_2.compute([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]) == 2 / 3
    assert get_reducer(f"at_least_3_{tag}").compute([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]) == 1 / 3

    result = last_mean.summarize([[0, 1], [1, 0], [1], [0]])  # plugins get uncertainty for free
    assert result.tasks_used == 4 and result.stderr is not None and result.method == "bootstrap"

