"""Terminal text for `compare` and `plan`: a few lines per comparison, the verdict and its
reasons, the planning table."""

from __future__ import annotations

from typing import Any

from gym_metrics.cli._base import format_table


def comparison_text(report: Any) -> str:
    """Each comparison in the lines its method writes (`CompareMethod.lines`)."""
    from gym_metrics.compare import get_method

    method = get_method(report.method_name)
    return "\n".join(line for c in report.comparisons for line in method.lines(report, c))


def verdict_text(verdict: Any) -> str:
    """`verdict: STATUS`, then one line per check with its reason."""
    lines = [f"verdict: {verdict.status}"]
    if len(verdict.checks) > 1:
        lines[0] += f" (intervals at {100 * verdict.confidence:.4g}%, Bonferroni over {len(verdict.checks)} checks)"
    for check in verdict.checks:
        lines.append(f"  {check.status}  {check.comparison}: {check.rule} {check.margin:g}: {check.reason}")
    return "\n".join(lines)


def plan_text(plan: Any, marked: int | None) -> str:
    """The model in two lines, then tasks needed per number of repeats."""
    head = [
        f"plan: detect a true difference of {plan.mde:g} in {plan.field} with {100 * plan.power:g}% power at alpha {plan.alpha:g}"
        f" (paired by task, two-sided t test)",
        f"  per-task difference variance: between {plan.between_difference:.4g} + within {plan.within_difference:.4g} / repeats"
        + (f" (assumed task correlation {plan.correlation:g} with {plan.agents[0]})" if plan.correlation is not None else
           f" (measured: {' - '.join(plan.agents)})"),
    ]  # fmt: skip
    if plan.note:
        head.append(f"  note: {plan.note}")
    rows = []
    for r in plan.rows:
        tasks = "-" if r.tasks is None else str(r.tasks)
        per_agent = "-" if r.rollouts_per_agent is None else str(r.rollouts_per_agent)
        mark = " *" if r.repeats == marked else ""
        rows.append([f"{r.repeats}{mark}", f"{r.sd_difference:.4f}", tasks, per_agent])
    table = format_table(["repeats", "sd(diff)", "tasks needed", "rollouts per agent"], rows)
    return "\n".join([*head, "", table, "", f"the baseline has {plan.baseline_tasks} tasks"])
