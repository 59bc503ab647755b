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
from dataclasses import replace
from itertools import combinations

import numpy as np

from gym_metrics.rollouts import RolloutColumns
from gym_metrics.compare._inputs import task_rewards
from gym_metrics.compare._method import Cell, CompareMethod, CompareOptions, register_method
from gym_metrics.compare._result import Comparison, ComparisonReport, only_tasks_lines
from gym_metrics.errors import InvalidInputError, NotFoundError
from gym_metrics.reducers import TaskRewards, get_reducer
from gym_metrics.statistics import (
    ADJUSTMENTS,
    CONFIDENCE,
    POWER,
    McNemar,
    VarianceComponents,
    components_from_groups,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_difference,
    t_interval,
)


PAIRED = "paired by task: clustered standard error, Student t with tasks - 1 df"
LAYOUT = (
    "metric", "field", "agent_a", "agent_b", "value_a", "value_b", "difference", "standard_error", "ci_low",
    "ci_high", "df", "p_value", "p_adjusted", "common_tasks", "repeats_a", "repeats_b", "mde", "sd_difference",
    "variance", "mcnemar", "only_a_tasks", "only_b_tasks",
)  # fmt: skip
"""The JSON keys of one paired comparison, in order. Its own numbers (`Comparison.stats`):
df; p_value; p_adjusted (over every comparison of the run, Holm or Benjamini-Hochberg);
repeats_a / repeats_b (mean rollouts per common task); mde (the true |A - B| this design
detects with the given power at alpha); sd_difference (sd of the per-task contributions to the
difference, se * sqrt(tasks)); variance (within_a, within_b, between_difference of the field's
rollout values on the common tasks: what `gym-metrics plan` uses); mcnemar (McNemar's exact
test when both agents have exactly one 0/1 rollout per task, else None)."""


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
) -> ComparisonReport:
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
    return ComparisonReport(out, adjust, confidence, alpha, power, PAIRED, "paired")


def _with_adjusted(c: Comparison, p: float) -> Comparison:
    return replace(c, stats={**c.stats, "p_adjusted": p})


Grouped = tuple[np.ndarray, TaskRewards]


def _compare_one(
    a: Grouped, b: Grouped, names: tuple[str, str], metric: str, field: str, confidence: float, power: float
) -> Comparison:
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
    notes: tuple[str, ...] = () if res.tasks == common.size else (f"  {common.size - res.tasks} common task(s) {metric} does not count for both agents: not used",)
    if sd == 0:  # the t test and the power model need a spread: none of their numbers would mean anything
        notes += (f"  every one of the {res.tasks} tasks differs by the same amount: the t test has no interval, p or MDE (n/a); "
                  "more tasks or rollouts, or McNemar's exact test where shown",)  # fmt: skip
    stats = {
        "df": res.df, "p_value": res.p_value, "p_adjusted": res.p_value,
        "repeats_a": float(ca.lengths.mean()), "repeats_b": float(cb.lengths.mean()),
        "mde": minimum_detectable_effect(res.tasks, sd, 1 - confidence, power) if sd > 0 else math.nan, "sd_difference": sd,
        "variance": _difference_components(ca, cb), "mcnemar": _mcnemar(ca, cb),
    }  # fmt: skip
    return Comparison(
        metric=metric, agent_a=names[0], agent_b=names[1], value_a=res.value_a, value_b=res.value_b,
        difference=res.difference, ci_low=res.ci_low, ci_high=res.ci_high, standard_error=res.standard_error,
        common_tasks=res.tasks,
        only_a_tasks=tuple(np.setdiff1d(tasks_a, common, assume_unique=True).tolist()),
        only_b_tasks=tuple(np.setdiff1d(tasks_b, common, assume_unique=True).tolist()),
        field=field, confidence=confidence, method=PAIRED, stats=stats, layout=LAYOUT, notes=notes,
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


@register_method("paired")
class PairedMethod(CompareMethod):
    """The default: clustered paired t test per pair x metric x field, adjusted p-values."""

    def run(self, agents: Mapping[str, RolloutColumns], names: Sequence[str], options: CompareOptions) -> ComparisonReport:
        return compare_paired(
            agents, names, options.reducers, options.fields, adjust=options.adjust, confidence=options.confidence,
            power=options.power, where=options.where, alpha=options.alpha,
        )  # fmt: skip

    def lines(self, report: ComparisonReport, c: Comparison) -> list[str]:
        """The difference, interval, p-values; values and tasks; McNemar; the MDE."""
        pct = f"{100 * report.confidence:g}%"
        lines = [
            f"{c.name} = {_num(c.difference, True)}  ({pct} CI [{_num(c.ci_low, True)}, {_num(c.ci_high, True)}], "
            f"se {_num(c.standard_error)}, p {_p(c.p_value)}, {report.adjust} p {_p(c.p_adjusted)})",
            f"  {c.agent_a}: {_num(c.value_a)}   {c.agent_b}: {_num(c.value_b)}   over {c.common_tasks} common tasks"
            f" ({c.repeats_a:g} / {c.repeats_b:g} rollouts per task)",
        ]
        if c.mcnemar is not None:
            m = c.mcnemar
            lines.append(f"  McNemar exact: {m.only_a} task(s) only {c.agent_a} passed, {m.only_b} only {c.agent_b}, p {_p(m.p_value)}")
        lines.append(f"  detectable with {100 * report.power:g}% power at alpha {report.alpha:g}: |difference| >= {_num(c.mde)}")
        return lines + list(c.notes) + only_tasks_lines(c)

    def columns(self, report: ComparisonReport) -> list[str]:
        return ["difference", f"{100 * report.confidence:g}% interval", "p", "p adjusted", "common tasks", "MDE"]

    def cells(self, c: Comparison) -> list[Cell]:
        return [c.difference, (c.ci_low, c.ci_high), c.p_value, c.p_adjusted, c.common_tasks, c.mde]

    def describe(self, report: ComparisonReport) -> str:
        return f"paired by task (clustered stderr, Student t), {report.adjust} adjusted"

    def verdict_interval(self, c: Comparison, confidence: float, m: int) -> tuple[float, float]:
        """The report's own interval for one check, else the t interval at `confidence`; a
        difference with no spread has none (NaN: the check is INCONCLUSIVE)."""
        if c.standard_error == 0:
            return math.nan, math.nan
        return (c.ci_low, c.ci_high) if m == 1 else t_interval(c.difference, c.standard_error, c.df, confidence)


def _num(x: float, signed: bool = False) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _p(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.3g}" if x >= 1e-4 else f"{x:.2e}"
