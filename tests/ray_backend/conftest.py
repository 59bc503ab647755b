"""One local Ray instance per test module, for the optional extra `gym-metrics[ray]`.

Without Ray the tests skip, except under CI=true (.ci/run installs the extra on the default
venv), where a missing Ray fails them: a CI that silently skipped them would prove nothing.
The check runs in a fixture, not at import, so `-m "not slow"` on a venv without Ray
deselects these tests cleanly instead of failing their collection.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest
from _ray import local_ray

from _ci import need_module


def import_ray() -> ModuleType:
    """The real ray module; skip (fail under CI=true) when it is not installed."""
    return need_module("ray", "the optional extra: pip install -e '.[ray]'")


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[ModuleType]:
    """A local Ray instance with 2 CPUs (no dashboard), shut down after the module. ray.init
    installs a SIGTERM handler in this process that shutdown leaves behind: it is restored, so
    the tests after these see the process as they would without Ray."""
    ray = import_ray()
    with local_ray(ray):
        yield ray
