"""Formulas for honest uncertainty: clustered standard errors, variance components, paired
tests, multiple-comparison adjustments and power (docs/statistics.md); the verdicts built on
them are in gym_metrics.compare.

numpy only on the paths that scale with rollouts; scipy.special (a dependency) only for
scalar tail probabilities, imported when first needed.
"""

from __future__ import annotations

from gym_metrics.statistics._cluster import (
    CONFIDENCE,
    VarianceComponents,
    cluster_stderr,
    components_from_groups,
    group_codes,
    linearized_stderr,
    t_interval,
    variance_components,
)
from gym_metrics.statistics._inference import (
    ADJUSTMENTS,
    McNemar,
    PairedDifference,
    benjamini_hochberg,
    holm,
    mcnemar_exact,
    paired_difference,
    wilson_interval,
)
from gym_metrics.statistics._power import (
    ALPHA,
    POWER,
    PlanRow,
    difference_sd,
    effect_size_for_power,
    minimum_detectable_effect,
    nobs_for_power,
    plan,
    ttest_power,
)
from gym_metrics.statistics._tdist import t_quantile

__all__ = [
    "ADJUSTMENTS",
    "ALPHA",
    "CONFIDENCE",
    "POWER",
    "McNemar",
    "PairedDifference",
    "PlanRow",
    "VarianceComponents",
    "benjamini_hochberg",
    "cluster_stderr",
    "components_from_groups",
    "difference_sd",
    "effect_size_for_power",
    "group_codes",
    "holm",
    "linearized_stderr",
    "mcnemar_exact",
    "minimum_detectable_effect",
    "nobs_for_power",
    "paired_difference",
    "plan",
    "t_interval",
    "t_quantile",
    "ttest_power",
    "variance_components",
    "wilson_interval",
]
