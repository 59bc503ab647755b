"""Old name of the paired comparison: use gym_metrics.compare (removal in 0.3.0)."""

from __future__ import annotations

import warnings

from gym_metrics.compare import PairedComparison, PairedReport, compare_paired, task_components
from gym_metrics.statistics import ALPHA

warnings.warn("gym_metrics.paired is deprecated; use gym_metrics.compare (removal in 0.3.0)", DeprecationWarning, stacklevel=2)

__all__ = ["ALPHA", "PairedComparison", "PairedReport", "compare_paired", "task_components"]
