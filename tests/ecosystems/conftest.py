"""Every test here scores against reasoning-gym itself: skipped without it (failed under
CI=true, where the dev extra brings it)."""

from __future__ import annotations

import pytest

from _rg_cases import rg


@pytest.fixture(autouse=True)
def _reasoning_gym() -> None:
    rg()
