"""A local Ray instance for a test module, shared by tests/ray_backend and tests/integrations."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


@contextmanager
def local_ray(ray: ModuleType) -> Iterator[ModuleType]:
    """Ray with 2 CPUs (no dashboard), shut down on exit. ray.init installs a SIGTERM handler
    that shutdown leaves behind: it is restored, so later tests see the process as without
    Ray. A start-up that times out on a loaded 2-core box is tried again (3 tries)."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for attempt in (1, 2, 3):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
            break
        except Exception as exc:  # "Timed out waiting for file", "The current node timed out during startup"
            ray.shutdown()
            if attempt == 3 or "timed out" not in str(exc).lower():
                raise
    try:
        yield ray
    finally:
        ray.shutdown()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
