"""Every package folder is listed for installation (an editable install hides a missing one)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
tomllib = pytest.importorskip("tomllib", reason="Python < 3.11 has no tomllib")


def test_every_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for top, name in (("gym_metrics", "gym_metrics"), ("servers", "gym_metrics_servers")):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / top)
            if "tests" in rel.parts or "node_modules" in rel.parts:
                continue
            found.add(".".join((name, *rel.parts)))
    assert found == listed, f"not listed: {sorted(found - listed)}; listed but absent: {sorted(listed - found)}"
