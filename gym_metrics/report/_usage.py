"""The usage section: tokens and cost against the value, per task bin and per agent, and the
`economics` block when the metrics were aggregated with --economics."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

import numpy as np

from gym_metrics.report import _svg
from gym_metrics.report._bounds import finite, short
from gym_metrics.report._data import AgentData
from gym_metrics.report._range import interval
from gym_metrics.report._sections import section, table
from gym_metrics.report._svg import Series, color, fmt

RANK = {"total_tokens": 0, "output_tokens": 2, "input_tokens": 3}
"""Which usage fields are drawn first (cost fields rank 1)."""


def usage(agents: Sequence[AgentData], value_field: str) -> str:
    """Each agent's mean usage against its mean value, then the tasks binned by usage."""
    fields = sorted({f for a in agents for f in a.usage}, key=lambda f: (RANK.get(f, 1), f))
    if not fields:
        return section("usage", "Usage vs reward", '<p class="empty">No token or cost fields in the metrics.</p>')
    charts = [_frontier(agents, fields[0], value_field)]
    charts += [c for f in fields[:2] if (c := _binned(agents, f, value_field))]
    note = (f"First: each agent's mean {short(fields[0])} per rollout against its mean {value_field} with its 95% clustered interval. "
            "Then the tasks cut into ten bins by their mean usage: each point is a bin's mean usage and its tasks' mean.")  # fmt: skip
    return section("usage", "Usage vs reward", "".join(charts) + _economics(agents), note)


def _frontier(agents: Sequence[AgentData], field: str, value_field: str) -> str:
    series, f = [], short(field)  # a field name from the file: shown cut, it is in every tooltip
    for i, a in enumerate(agents):
        x, y = a.agent_metrics.get(f"mean/{field}"), a.agent_metrics.get(f"mean/{value_field}")
        if not finite(x) or not finite(y):
            continue
        low, high, _ = interval(a, value_field, value_field)
        tip = f"{a.name}: mean {f} {fmt(x)}, mean {value_field} {fmt(y)} [{fmt(low)}, {fmt(high)}]"
        ok = math.isfinite(low) and math.isfinite(high)
        series.append(Series(a.name, [float(x)], [float(y)], [float(low)] if ok else None, [float(high)] if ok else None, color(i), [tip]))
    if not series:
        return ""
    return _svg.line_chart("usage-frontier", f"mean {value_field} against mean {f}, per agent", series, f"mean {f}", f"mean {value_field}")


def _binned(agents: Sequence[AgentData], field: str, value_field: str) -> str:
    series, f = [], short(field)
    for i, a in enumerate(agents):
        u = a.usage.get(field)
        if u is None:
            continue
        ok = np.isfinite(u) & np.isfinite(a.task_mean)
        if not ok.any():
            continue
        cuts = np.array_split(np.argsort(u[ok], kind="stable"), min(10, int(ok.sum())))
        xs = [float(u[ok][c].mean()) for c in cuts]
        ys = [float(a.task_mean[ok][c].mean()) for c in cuts]
        tips = [f"{a.name}: {len(c)} tasks, mean {f} {fmt(x)}, mean {value_field} {fmt(y)}" for c, x, y in zip(cuts, xs, ys)]
        series.append(Series(a.name, xs, ys, color=color(i), labels=tips))
    if not series:
        return ""
    return _svg.line_chart("usage-vs-reward", f"mean {value_field} by {f} decile", series, f"task mean {f}", f"mean {value_field}")


def _economics(agents: Sequence[AgentData]) -> str:
    """The --economics block: passing tasks and what each cost."""
    keys = ("passing_tasks", "tasks", "tokens_per_passing_task", "cost_per_passing_task", "total_tokens/total", "cost/total")
    shown = [k for k in keys if any(f"economics/{k}" in a.economics for a in agents)]
    if not shown:
        return ""
    rows = [[escape(a.name), *(fmt(float(a.economics[f"economics/{k}"])) if f"economics/{k}" in a.economics else "" for k in shown)]
            for a in agents]  # fmt: skip
    return "<h3>Economics</h3>" + table(["agent", *(k.replace("_", " ") for k in shown)], rows, "num")
