"""Terminal text for `compare` and `plan`: a few lines per comparison, the verdict and its
reasons, the planning table."""

from __future__ import annotations

import math
from typing import Any

from gym_metrics.cli._base import format_table


def _num(x: float, signed: bool = False) -> str:
    if not math.isfinite(x):
        return "n/a"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def _p(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{x:.3g}" if x >= 1e-4 else f"{x:.2e}"


def paired_text(report: Any) -> str:
    """Each comparison: the difference, interval, p-values; values and tasks; McNemar; the MDE."""
    pct = f"{100 * report.confidence:g}%"
    lines = []
    for c in report.comparisons:
        lines.append(
            f"{c.name} = {_num(c.difference, True)}  ({pct} CI [{_num(c.ci_low, True)}, {_num(c.ci_high, True)}], "
            f"se {_num(c.standard_error)}, p {_p(c.p_value)}, {report.adjust} p {_p(c.p_adjusted)})"
        )
        lines.append(
            f"  {c.agent_a}: {_num(c.value_a)}   {c.agent_b}: {_num(c.value_b)}   over {c.common_tasks} common tasks"
            f" ({c.repeats_a:g} / {c.repeats_b:g} rollouts per task)"
        )
        if c.mcnemar is not None:
            m = c.mcnemar
            lines.append(f"  McNemar exact: {m.only_a} task(s) only {c.agent_a} passed, {m.only_b} only {c.agent_b}, p {_p(m.p_value)}")
        lines.append(
            f"  detectable with {100 * report.power:g}% power at alpha {report.alpha:g}: |difference| >= {_num(c.mde)}"
        )
        for name, only in ((c.agent_a, c.only_a_tasks), (c.agent_b, c.only_b_tasks)):
            if only:
                shown = ", ".join(map(str, only[:10])) + (", ..." if len(only) > 10 else "")
                lines.append(f"  {len(only)} task(s) only {name} has (not used): {shown}")
    return "\n".join(lines)


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
