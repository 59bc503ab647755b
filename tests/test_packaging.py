"""Every package folder is listed for installation (an editable install hides a missing one)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
tomllib = pytest.importorskip("tomllib", reason="Python < 3.11 has no tomllib")


def test_every_package_ships_and_no_test_does() -> None:
    """The wheel's packages are found, not listed: every package of gym_metrics/ and
    gym_metrics_servers/ (a new environment's folder too), none of their tests."""
    from setuptools import find_packages

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    shipped = set(find_packages(str(ROOT), include=config["include"], exclude=config["exclude"]))
    found = set()
    for top in ("gym_metrics", "gym_metrics_servers"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            if "tests" not in rel.parts and "node_modules" not in rel.parts:
                found.add(".".join(rel.parts))
    assert shipped == found, f"not shipped: {sorted(found - shipped)}; shipped but not ours: {sorted(shipped - found)}"
    assert {"gym_metrics_servers.code_tests", "gym_metrics.sandbox", "gym_metrics.integrations"} <= shipped


TOOLING_EXTRAS = {"dev", "docs", "bench"}
"""Extras for working on gym-metrics itself, not features of it: left out of `all`."""
APART = {"openenv": "fastmcp 3 (openenv's) pins mcp < 2; the mcp extra needs mcp >= 2.3"}
"""Feature extras that cannot install beside the others (pip refuses the set): left out of `all`,
each with why."""


def test_the_all_extra_installs_every_optional_feature() -> None:
    """`pip install "gym-metrics[all]"` (a user's first guess) brings every feature extra, by
    naming them (pip resolves an extra that names its own project's extras)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert "all" in extras, "no [all] extra"
    named: set[str] = set()
    for requirement in extras["all"]:
        name, _, rest = requirement.partition("[")
        assert name.strip() == project["name"], f"[all] should name {project['name']}'s own extras, not {requirement!r}"
        named |= {e.strip() for e in rest.rstrip("]").split(",")}
    features = set(extras) - TOOLING_EXTRAS - set(APART) - {"all"}
    assert set(APART) <= set(extras) and not named & set(APART)
    assert named == features, f"[all] misses {sorted(features - named)}; names unknown {sorted(named - features)}"
