"""Old name of `gym_metrics.environments` (removal in 0.3.0): import SimpleResourcesServer
from `gym_metrics` or `gym_metrics.environments`."""

from gym_metrics._util.deprecated import warn_module

warn_module(__name__)

from gym_metrics.environments import SimpleResourcesServer  # noqa: E402

__all__ = ["SimpleResourcesServer"]
