"""Old name of the run economics, now `gym_metrics.reducers.economics` (removal in 0.3.0)."""

from gym_metrics._util.deprecated import warn_module

warn_module(__name__)

from gym_metrics.reducers import ECONOMICS_PREFIX as PREFIX  # noqa: E402
from gym_metrics.reducers import economics  # noqa: E402

__all__ = ["economics"]  # and PREFIX, as before
