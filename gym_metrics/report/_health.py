"""The Rollout health section: each agent's health verdicts and its findings per check, from the
`health` section `collect --health` (or `gym-metrics health --metrics`) writes into the metrics
file. Drawn only when an agent has one; every text from the file is escaped and cut."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from gym_metrics.report._bounds import CELL_CHARS, MAX_KEY_METRICS, short
from gym_metrics.report._data import AgentData
from gym_metrics.report._sections import section, table

VERDICTS = ("healthy", "unhealthy", "unobserved")


def _count(value: float | None) -> str:
    return "" if value is None or value != value else f"{value:,.0f}" if float(value).is_integer() else escape(f"{value:g}")


def health(agents: Sequence[AgentData]) -> str:
    """Verdicts per agent, then the checks that found something (rows) by agent (columns)."""
    shown = [a for a in agents if a.health]
    if not shown:
        return ""
    rows = []
    for a in shown:
        v, checked = a.health["verdicts"], a.health["records"]
        unhealthy = v.get("unhealthy")
        share = f" ({unhealthy / checked:.1%})" if unhealthy is not None and checked and checked == checked else ""
        rows.append([escape(a.name), _count(checked), _count(v.get("healthy")), _count(unhealthy) + share, _count(v.get("unobserved"))])
    body = table(["agent", "rollouts checked", *VERDICTS], rows, "num")
    checks = [c for c in dict.fromkeys(k for a in shown for k in a.health["issues"]) if any(a.health["issues"].get(c) for a in shown)]
    if checks:
        found = [[escape(short(c, CELL_CHARS)), *(_count(a.health["issues"].get(c)) for a in shown)] for c in checks[:MAX_KEY_METRICS]]
        body += "<h3>Findings per check</h3>" + table(["check", *(a.name for a in shown)], found, "num")
    else:
        body += '<p class="empty">No check found anything.</p>'
    ignored = sorted({c for a in shown for c in a.health["ignored_checks"]})
    note = ("NeMo Gym's rollout health checks over the rollouts (collect --health, or gym-metrics health --metrics): a rollout "
            "is unhealthy with a finding, unobserved when a check lacked its evidence (no trajectory), else healthy; a task "
            "flag counts for each agent with a rollout of that task (docs/health.md).")  # fmt: skip
    if ignored:
        note += " Ignored: " + ", ".join(short(c, CELL_CHARS) for c in ignored) + "."
    if len(checks) > MAX_KEY_METRICS:
        note += f" The first {MAX_KEY_METRICS} of {len(checks)} checks."
    return section("health", "Rollout health", body, note)
