"""Is agent A better than agent B? Comparisons paired by task: the analytic paired test and the
paired bootstrap (each a registered `CompareMethod`), the CI-gating verdict over their
intervals, and planning how many tasks x repeats a comparison needs (docs/statistics.md).

Every method returns one result type, `ComparisonReport` (a list of `Comparison` rows, one
A - B difference each); `compare_agents` returns the single `Comparison` of a bootstrap.
`PairedReport` and `PairedComparison`, the old names of these two classes, still work with a
DeprecationWarning.
"""

from __future__ import annotations

from gym_metrics._util.deprecated import old_names
from gym_metrics.compare._bootstrap import BootstrapMethod, compare_agents
from gym_metrics.compare._inputs import load_agents, task_rewards
from gym_metrics.compare._method import (
    METHODS,
    Cell,
    CompareMethod,
    CompareOptions,
    get_method,
    method_names,
    register_method,
)
from gym_metrics.compare._paired import PairedMethod, compare_paired, task_components
from gym_metrics.compare._planning import DEFAULT_CORRELATION, DEFAULT_REPEATS, Plan, plan_from_baseline
from gym_metrics.compare._result import CONFIDENCE, Comparison, ComparisonReport
from gym_metrics.compare._verdict import (
    EXIT_CODES,
    FAIL,
    INCONCLUSIVE,
    PASS,
    Check,
    Verdict,
    combine,
    fail_if_worse_by,
    gate,
    require_better_by,
)

__getattr__ = old_names(__name__)  # PairedReport, PairedComparison (gym_metrics/_util/deprecated.py)

__all__ = [
    "CONFIDENCE",
    "DEFAULT_CORRELATION",
    "DEFAULT_REPEATS",
    "EXIT_CODES",
    "FAIL",
    "INCONCLUSIVE",
    "METHODS",
    "PASS",
    "BootstrapMethod",
    "Cell",
    "Check",
    "CompareMethod",
    "CompareOptions",
    "Comparison",
    "ComparisonReport",
    "PairedMethod",
    "Plan",
    "Verdict",
    "combine",
    "compare_agents",
    "compare_paired",
    "fail_if_worse_by",
    "gate",
    "get_method",
    "load_agents",
    "method_names",
    "plan_from_baseline",
    "register_method",
    "require_better_by",
    "task_components",
    "task_rewards",
]
