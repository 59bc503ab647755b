"""Build the HTML report of one metrics file (and optionally a second one to compare with)."""

from __future__ import annotations

import math
from dataclasses import replace
from html import escape
from pathlib import Path

import numpy as np

from gym_metrics._util.atomic import written_atomically
from gym_metrics.errors import InvalidInputError
from gym_metrics.report import _health, _page, _rollouts_html, _sections, _usage
from gym_metrics.report._bounds import FULL_NAME_CHARS, MAX_AGENTS, shown_names
from gym_metrics.report._data import SAMPLES_PER_AGENT, AgentData, load_metrics
from gym_metrics.report._rollout_rows import RolloutSample, read_sample
from gym_metrics.report._sections import Gates, section


def report_path_for(metrics_path: str | Path) -> Path:
    """`<stem>_report.html` beside `<stem>_aggregate_metrics.json` (what --report writes)."""
    p = Path(metrics_path)
    stem = p.name.removesuffix(".json").removesuffix("_aggregate_metrics")
    return p.with_name(f"{stem}_report.html")


def rollouts_path_for(metrics_path: str | Path) -> Path:
    """`<stem>.jsonl` beside `<stem>_aggregate_metrics.json` (the rollouts collect and aggregate read or wrote)."""
    p = Path(metrics_path)
    return p.with_name(p.name.removesuffix(".json").removesuffix("_aggregate_metrics") + ".jsonl")


def build_report(
    metrics: str | Path,
    output: str | Path | None = None,
    *,
    rollouts: str | Path | None = None,
    compare: str | Path | None = None,
    field: str = "reward",
    gates: Gates | None = None,
    trajectories: bool = True,
) -> Path:
    """Write the report of `metrics` (and `compare`'s agents beside them) to `output`
    (default `<stem>_report.html`); returns its path (the page's verdict, if any, is set on
    `gates.status`). `rollouts` supplies per-rollout values
    when the metrics file was written without rollout_infos. The page shows a verdict only
    when a rule in `gates` asks for one. With
    `trajectories`, a bounded sample of the rollouts file (`rollouts`, else `<stem>.jsonl`
    beside the metrics when there is one) is shown rollout by rollout."""
    metrics = Path(metrics)
    out = Path(output) if output is not None else report_path_for(metrics)
    agents = load_metrics(metrics, field, Path(rollouts) if rollouts is not None else None)
    rows = Path(rollouts) if rollouts is not None else rollouts_path_for(metrics)
    sample = read_sample(rows, [a.own_name for a in agents], field) if trajectories and rows.is_file() else None
    if compare is not None:
        other = load_metrics(Path(compare), field)
        mine = {a.name for a in agents}
        if mine & {a.name for a in other}:
            other = load_metrics(Path(compare), field, label=f"{report_path_for(compare).name.removesuffix('_report.html')}:")
        agents += [replace(a, compared=True) for a in other]
    if not agents:
        raise InvalidInputError(f"{metrics}: holds no agents")
    if gates is None:  # a verdict only when a rule asks for one (its margin is the user's to choose)
        gates = Gates()
    html = render(agents, field, gates, title=f"gym-metrics report: {metrics.name}", sample=sample)
    with written_atomically(out) as tmp:
        tmp.write_text(html, encoding="utf-8")
    return out


def render(agents: list[AgentData], field: str, gates: Gates, title: str, sample: RolloutSample | None = None) -> str:
    """The page's HTML for these agents (the first MAX_AGENTS, their names cut: _bounds), and
    the Rollouts section of `sample` when given."""
    total = len(agents)
    agents, names = _bounded(agents)
    tasks, matrix = _page.task_matrix(agents)
    finite = matrix[np.isfinite(matrix)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    rollouts = sum(len(a.rollouts) for a in agents if a.rollouts is not None)
    drawn = f"{total} agents, the first {len(agents)} drawn" if total > len(agents) else f"{total} agents"
    subtitle = f"{drawn} ({', '.join(a.name for a in agents)}), {len(tasks)} tasks" + (
        f", {rollouts} rollouts" if rollouts else ""
    )
    table_note = (
        f"mean {field} per task and agent (colour: {_svg_range(lo, hi)}); click a header to sort, a row for the task's "
        f"sample (embedded for up to {SAMPLES_PER_AGENT} tasks per agent: the first and the lowest-scoring)."
    )
    tasks_body = _sections.overview(agents, tasks, matrix, lo, hi) + _page.task_view(agents, tasks, matrix, lo, hi)
    sections = [
        _sections.key_metrics(agents, field) + names,
        _sections.distribution(agents, field),
        _sections.pass_at_k(agents, field),
        section("tasks", "Tasks x agents", tasks_body, table_note, wide=True),
        _sections.repeats(agents, field),
        _usage.usage(agents, field),
        _sections.paired(agents, field, gates),
    ]
    health = _health.health(agents)
    nav = [("health", "Health")] if health else []
    sections += [health] if health else []
    if sample is None:
        return _page.page(title, subtitle, sections, extra_nav=nav)
    sections.append(_rollouts_html.rollouts(agents, sample, field))
    return _page.page(title, subtitle, sections, extra_nav=[*nav, ("rollouts", "Rollouts")], css=_rollouts_html.CSS)


def _svg_range(lo: float, hi: float) -> str:
    return f"red {lo:.4g} to green {hi:.4g}" if math.isfinite(lo) and math.isfinite(hi) else "n/a"


def _bounded(agents: list[AgentData]) -> tuple[list[AgentData], str]:
    """The first MAX_AGENTS agents with their names cut (what every chart, cell and pair
    repeats), and the list of the cut names in full, drawn once."""
    agents = agents[:MAX_AGENTS]
    shown = shown_names([a.name for a in agents])
    cut = [(s, a.name) for s, a in zip(shown, agents) if s != a.name]
    if not cut:
        return agents, ""
    rows = "".join(
        f"<tr><td>{escape(s)}</td><td>{escape(full[:FULL_NAME_CHARS])}"
        + (f" … ({len(full) - FULL_NAME_CHARS:,} more characters in the metrics file)" if len(full) > FULL_NAME_CHARS else "")
        + "</td></tr>"
        for s, full in cut
    )
    names = (f'<section id="agent-names" class="wide"><h2>Agent names</h2><p class="note">Long names are shown cut '
             f'(a hash keeps them apart); in full:</p><table><tbody>{rows}</tbody></table></section>')  # fmt: skip
    return [replace(a, name=s) for s, a in zip(shown, agents)], names
