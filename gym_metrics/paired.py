"""The analytic paired comparison behind `gym-metrics compare`: per pair of agents and per
metric, the difference over common tasks with a clustered standard error, t interval and p-value,
McNemar's exact test where it applies, adjusted p-values over the family, and the minimum
detectable effect of the design (docs/statistics.md).

Each agent's value is its reducer's sum(numerator) / sum(weight) over tasks (`Reducer.task_terms`),
so one formula covers a mean of task means (mean_reward), a mean over rollouts (pass_rate) and
the pass@k family; reducers without per-task terms need `--method bootstrap`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import combinations
from typing import Any

import numpy as np

from gym_metrics.aggregate import RolloutColumns
from gym_metrics.compare import task_rewards
from gym_metrics.errors import InvalidInputError, NotFoundError
from gym_metrics.reducers import TaskRewards, get_reducer
from gym_metrics.statistics import (
    ADJUSTMENTS,
    ALPHA,
    CONFIDENCE,
    POWER,
    McNemar,
    VarianceComponents,
    components_from_groups,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_difference,
)


@dataclass(frozen=True)
class PairedComparison:
    """metric(A) - metric(B) over the tasks both agents have, tested as paired by task."""

    metric: str
    field: str
    agent_a: str
    agent_b: str
    value_a: float
    value_b: float
    difference: float
    standard_error: float
    """Clustered by task (docs/statistics.md#paired-difference)."""
    ci_low: float
    ci_high: float
    df: int
    p_value: float
    p_adjusted: float
    """Adjusted over every comparison of the run (Holm or Benjamini-Hochberg)."""
    common_tasks: int
    repeats_a: float
    """Mean rollouts per common task."""
    repeats_b: float
    mde: float
    """Minimum detectable effect: the true |A - B| this design detects with 80% power at alpha."""
    sd_difference: float
    """sd of the per-task contributions to the difference (se * sqrt(tasks))."""
    variance: dict[str, float]
    """Variance components of the field's rollout values on the common tasks (within_a,
    within_b, between_difference): what `gym-metrics plan` uses."""
    mcnemar: McNemar | None
    """McNemar's exact test, when both agents have exactly one 0/1 rollout per task."""
    only_a_tasks: tuple[int, ...]
    only_b_tasks: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"{self.metric}({self.field}): {self.agent_a} - {self.agent_b}"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["only_a_tasks"], out["only_b_tasks"] = list(self.only_a_tasks), list(self.only_b_tasks)
        return out


@dataclass(frozen=True)
class PairedReport:
    """Every pair of agents for every metric and field, with adjusted p-values."""

    comparisons: list[PairedComparison]
    adjust: str
    confidence: float
    alpha: float
    power: float
    method: str = "paired by task: clustered standard error, Student t with tasks - 1 df"

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if k != "comparisons"}
        out["comparisons"] = [c.to_dict() for c in self.comparisons]
        return out


def compare_paired(
    agents: Mapping[str, RolloutColumns],
    names: Sequence[str],
    metrics: Sequence[str] = ("mean_reward",),
    fields: Sequence[str] = ("reward",),
    *,
    adjust: str = "holm",
    confidence: float = CONFIDENCE,
    power: float = POWER,
    where: str = "",
    alpha: float | None = None,
) -> PairedReport:
    """All pairs (in the order named: A-B, A-C, B-C) x metrics x fields, p-values adjusted
    together. `where` names the source in errors. `alpha`, when given, sets the confidence to
    1 - alpha and is reported as given (1 - (1 - 0.05) is 0.050000000000000044 in floats)."""
    if adjust not in ADJUSTMENTS:
        raise InvalidInputError(f"unknown --adjust {adjust!r}; known: {', '.join(ADJUSTMENTS)}")
    if len(set(names)) != len(names) or len(names) < 2:
        raise InvalidInputError(f"compare needs at least two distinct agents, got {', '.join(names) or '(none)'}")
    for name in names:
        if name not in agents:
            raise NotFoundError(f"unknown agent {name!r}; agents{where}: {', '.join(sorted(agents)) or '(none)'}")
    if alpha is not None:
        confidence = 1 - alpha
    else:
        alpha = 1 - confidence
    found = []
    for field in fields:
        rewards = {n: task_rewards(agents[n], field) for n in names}
        for metric in metrics:
            for a, b in combinations(names, 2):
                found.append(_compare_one(rewards[a], rewards[b], (a, b), metric, field, confidence, power))
    adjusted = ADJUSTMENTS[adjust](np.array([c.p_value for c in found]))
    out = [_with_adjusted(c, float(p)) for c, p in zip(found, adjusted)]
    return PairedReport(out, adjust, confidence, alpha, power)


def _with_adjusted(c: PairedComparison, p: float) -> PairedComparison:
    d = {k: getattr(c, k) for k in c.__dataclass_fields__}
    d["p_adjusted"] = p
    return PairedComparison(**d)


Grouped = tuple[np.ndarray, TaskRewards]


def _compare_one(
    a: Grouped, b: Grouped, names: tuple[str, str], metric: str, field: str, confidence: float, power: float
) -> PairedComparison:
    (tasks_a, ra), (tasks_b, rb) = a, b
    common = np.intersect1d(tasks_a, tasks_b, assume_unique=True)
    if common.size < 2:
        raise InvalidInputError(
            f"agents {names[0]!r} and {names[1]!r} share {common.size} task(s) with a measured {field!r}; "
            "a paired comparison needs at least 2"
        )
    ca, cb = ra.take(np.searchsorted(tasks_a, common)), rb.take(np.searchsorted(tasks_b, common))
    reducer = get_reducer(metric)
    terms_a, terms_b = reducer.task_terms(ca), reducer.task_terms(cb)
    if terms_a is None or terms_b is None:
        raise InvalidInputError(f"reducer {metric!r} has no per-task form for the analytic test; use --method bootstrap")
    (na, wa), (nb, wb) = terms_a, terms_b
    keep = (wa > 0) & (wb > 0)  # tasks the reducer counts for both (unbiased_pass@k needs k rollouts)
    if int(keep.sum()) < 2:
        raise InvalidInputError(f"{metric!r} counts fewer than 2 of the common tasks of {names[0]!r} and {names[1]!r}")
    res = paired_difference(na[keep], nb[keep], wa[keep], wb[keep], confidence)
    sd = res.standard_error * math.sqrt(res.tasks)
    return PairedComparison(
        metric=metric, field=field, agent_a=names[0], agent_b=names[1],
        value_a=res.value_a, value_b=res.value_b, difference=res.difference, standard_error=res.standard_error,
        ci_low=res.ci_low, ci_high=res.ci_high, df=res.df, p_value=res.p_value, p_adjusted=res.p_value,
        common_tasks=int(common.size), repeats_a=float(ca.lengths.mean()), repeats_b=float(cb.lengths.mean()),
        mde=minimum_detectable_effect(res.tasks, sd, 1 - confidence, power), sd_difference=sd,
        variance=_difference_components(ca, cb), mcnemar=_mcnemar(ca, cb),
        only_a_tasks=tuple(np.setdiff1d(tasks_a, common, assume_unique=True).tolist()),
        only_b_tasks=tuple(np.setdiff1d(tasks_b, common, assume_unique=True).tolist()),
    )  # fmt: skip


def _mcnemar(a: TaskRewards, b: TaskRewards) -> McNemar | None:
    """McNemar's test applies to one binary outcome per task per agent, nothing else."""
    if not ((a.lengths == 1).all() and (b.lengths == 1).all()):
        return None
    if not (np.isin(a.values, (0.0, 1.0)).all() and np.isin(b.values, (0.0, 1.0)).all()):
        return None
    return mcnemar_exact(a.values, b.values)


def task_components(rewards: TaskRewards) -> VarianceComponents:
    """Between- and within-task variance of one agent's rollout values."""
    counts = rewards.lengths.astype(np.float64)
    means = rewards.sum_per_task(rewards.values) / np.maximum(counts, 1)
    within_ss = float(((rewards.values - means[rewards.task_ids]) ** 2).sum())
    return components_from_groups(means, counts, within_ss)


def _difference_components(a: TaskRewards, b: TaskRewards) -> dict[str, float]:
    """within_a, within_b and between_difference = max(0, var(m_a - m_b) - within_a mean(1/k_a)
    - within_b mean(1/k_b)), m the per-task means: the true per-task differences' variance."""
    va, vb = task_components(a), task_components(b)
    ma = a.sum_per_task(a.values) / a.lengths
    mb = b.sum_per_task(b.values) / b.lengths
    noise = sum(v.within * v.mean_inverse_repeats for v in (va, vb) if math.isfinite(v.within))
    between = max(0.0, float(np.var(ma - mb, ddof=1)) - noise)
    return {"within_a": va.within, "within_b": vb.within, "between_difference": between}


__all__ = ["ALPHA", "PairedComparison", "PairedReport", "compare_paired", "task_components"]
