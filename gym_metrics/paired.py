"""Old name of the paired comparison: use gym_metrics.compare (removal in 0.3.0)."""

from gym_metrics._util.deprecated import warn_module

warn_module(__name__)

from gym_metrics.compare import Comparison as PairedComparison  # noqa: E402
from gym_metrics.compare import ComparisonReport as PairedReport  # noqa: E402
from gym_metrics.compare import compare_paired, task_components  # noqa: E402
from gym_metrics.statistics import ALPHA  # noqa: E402

__all__ = ["ALPHA", "PairedComparison", "PairedReport", "compare_paired", "task_components"]
