"""The Chromium binary for the viewer's browser test (skip without one, except under CI=true,
where .ci/run installs Debian's chromium and a missing browser fails the test)."""

from __future__ import annotations

import pytest

from gym_metrics.report import find_chromium

from _ci import missing


@pytest.fixture(scope="session")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        missing("no Chromium found (apt-get install chromium, or set $CHROMIUM)")
    return found
