"""Fixtures of the collector tests that run servers and collectors as subprocesses."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from test_collector_faults import Procs


@pytest.fixture
def procs() -> Iterator[Procs]:
    """Subprocesses started by a test, killed at its end whatever happened."""
    p = Procs()
    try:
        yield p
    finally:
        p.kill_all()
