"""Fixtures of the report tests: a 3-agent metrics file, and the Chromium binary (skip without
one, except under CI=true, where .ci/run installs Debian's chromium and a missing browser fails
the tests: a CI that silently skipped them would prove nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gym_metrics.report import find_chromium

from _ci import missing
from _report_sample import sample_metrics

MISSING = "no Chromium found (apt-get install chromium, or set $CHROMIUM)"


@pytest.fixture(scope="module")
def three_agents(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The metrics file of 3 agents x 60 tasks x 4 rollouts, with token usage."""
    return sample_metrics(tmp_path_factory.mktemp("report"), tasks=60)


@pytest.fixture(scope="session")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        missing(MISSING)
    return found
