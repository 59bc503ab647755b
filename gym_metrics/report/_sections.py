"""The report's sections, each a chart (inline SVG) and a small table, computed in numpy from
the agents' arrays so their cost grows with tasks only through a few vector passes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

import numpy as np

from gym_metrics.errors import InvalidInputError
from gym_metrics.compare import Cell, CompareOptions, gate, get_method
from gym_metrics.reducers import get_reducer
from gym_metrics.report import _svg
from gym_metrics.report._bounds import CELL_CHARS, MAX_KEY_METRICS, MAX_REPEATS, finite, short
from gym_metrics.report._data import AgentData
from gym_metrics.report._range import cut, interval, shown_value, unit_bounded
from gym_metrics.report._svg import Series, color, fmt

MAX_PASS_K = 16
"""pass@k is drawn for every k up to this, and at powers of two beyond it."""
HIST_BINS = 20
OVERVIEW_BINS = 100


METHOD = "paired"
"""The comparison method the report draws (any registered one renders through its own rows)."""
STATUS_RANK = {"": 0, "PASS": 1, "INCONCLUSIVE": 2, "FAIL": 3}
STATUS_COLOR = {"PASS": "#1a7f37", "INCONCLUSIVE": "#bf8700", "FAIL": "#cf222e"}


@dataclass
class Gates:
    """The verdict's rules, as `compare` takes them; without either rule, no verdict."""

    fail_if_worse_by: float | None = None
    require_better_by: float | None = None
    status: str | None = None
    """The verdict the page shows (PASS, FAIL, INCONCLUSIVE), once rendered; None: none."""
    unreachable: str | None = None
    """Why no verdict could be given, once rendered, when a rule asked for one."""

    @property
    def asked(self) -> bool:
        return self.fail_if_worse_by is not None or self.require_better_by is not None


def section(sid: str, title: str, body: str, note: str = "", wide: bool = False) -> str:
    hint = f'<p class="note">{escape(note)}</p>' if note else ""
    cls = ' class="wide"' if wide else ""
    return f'<section id="{sid}"{cls}><h2>{escape(title)}</h2>{hint}{body}</section>'


def table(head: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>'


def _num(v: Any) -> str:
    return fmt(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else escape(short(str(v), CELL_CHARS))


def key_metrics(agents: Sequence[AgentData], value_field: str) -> str:
    """Key metrics (rows) by agent (columns), each mean with its clustered 95% interval."""
    keys = list(dict.fromkeys(k for a in agents for k in a.key_metrics))
    rows = [[escape(short(k)), *(_with_interval(a, k, value_field) for a in agents)] for k in keys[:MAX_KEY_METRICS]]
    forest_rows = [
        (a.name, float(a.agent_metrics[f"mean/{value_field}"]), *interval(a, value_field, value_field)[:2], color(i))
        for i, a in enumerate(agents) if finite(a.agent_metrics.get(f"mean/{value_field}"))
    ]  # fmt: skip
    chart = _svg.forest("key-metrics", f"mean/{value_field} by agent, 95% clustered interval", forest_rows, f"mean/{value_field}", None)
    body = chart + table(["key metric", *(a.name for a in agents)], rows, "num")
    note = "value [95% interval]: tasks as clusters, Student t (docs/metrics.md#agent-uncertainty)." + BOUNDED_NOTE + (
        f" The first {MAX_KEY_METRICS} of {len(keys)} key metrics." if len(keys) > MAX_KEY_METRICS else "")
    return section("key-metrics", "Key metrics", body, note, wide=True)


BOUNDED_NOTE = (" An interval of a value bounded in [0, 1] (a 0/1 field, or a reward whose every value lies in [0, 1]) is cut"
                " at 0 and 1, marked * (the metrics file keeps the Student-t ends; docs/statistics.md#bounded-intervals).")  # fmt: skip


def _with_interval(a: AgentData, key: str, value_field: str) -> str:
    if key not in a.key_metrics:
        return ""
    shown, was_cut = shown_value(a, key, a.key_metrics[key], value_field)
    value = _num(shown) + ("*" if was_cut else "")
    if not key.startswith("mean/") or not all(f"cluster_ci_{s}_95/{key[5:]}" in a.agent_metrics for s in ("low", "high")):
        return value
    low, high, was_cut = interval(a, key[5:], value_field)
    return f'{value} <span class="ci">[{_num(low)}, {_num(high)}]{"*" if was_cut else ""}</span>'


def distribution(agents: Sequence[AgentData], value_field: str) -> str:
    """Histogram of the tasks' mean value, one bar per agent per bin."""
    means = [a.task_mean[np.isfinite(a.task_mean)] for a in agents]
    both = np.concatenate(means) if means else np.zeros(0)
    lo, hi = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, HIST_BINS + 1)
    counts = [(a.name, color(i), np.histogram(m, edges)[0].astype(float).tolist()) for i, (a, m) in enumerate(zip(agents, means))]
    chart = _svg.bar_chart("reward-distribution", f"Distribution of the tasks' mean {value_field}", edges.tolist(),
                           counts, f"task mean {value_field}", "tasks")  # fmt: skip
    return section("distribution", f"{value_field.capitalize()} distribution", chart, f"Each task's mean {value_field} over its rollouts, binned.")


def overview(agents: Sequence[AgentData], tasks: np.ndarray, matrix: np.ndarray, lo: float, hi: float) -> str:
    """Tasks sorted by their mean over agents, cut into bins: the whole task set at a glance."""
    order = np.argsort(finite_mean(matrix, axis=0), kind="stable")
    bins = max(1, min(OVERVIEW_BINS, len(tasks)))
    cuts = np.array_split(order, bins)
    rows = [(a.name, [float(finite_mean(matrix[i][c])) for c in cuts]) for i, a in enumerate(agents)]
    label = f"{len(tasks)} tasks sorted by their mean over agents, in {bins} bins (lowest left)"
    return _svg.heat_strip("task-heatmap-overview", "Mean by task bin and agent", rows, lo, hi, label)


def finite_mean(x: np.ndarray, axis: int | None = None) -> Any:
    """Mean over the finite values (NaN where there are none), without nanmean's warning."""
    ok = np.isfinite(x)
    total, count = np.where(ok, x, 0.0).sum(axis=axis), ok.sum(axis=axis)
    return np.divide(total, count, out=np.full(np.shape(total), np.nan), where=count > 0)


def pass_at_k(agents: Sequence[AgentData], value_field: str) -> str:
    """Unbiased pass@k (Chen et al.) for k = 1..K with its 95% interval, per agent."""
    series, rows = [], []
    for i, a in enumerate(agents):
        grouped = a.task_rewards(value_field)
        if grouped is None or len(grouped[1]) == 0:
            continue
        rewards = grouped[1]
        top = int(np.median(rewards.lengths)) if len(rewards) else 0
        ks = [k for k in range(1, top + 1) if k <= MAX_PASS_K or k & (k - 1) == 0]
        results = [get_reducer(f"unbiased_pass@{k}").summarize(rewards) for k in ks]
        if not results:
            continue
        ys = [r.value for r in results]
        lows = [r.ci_low if r.ci_low is not None else r.value for r in results]
        highs = [r.ci_high if r.ci_high is not None else r.value for r in results]
        series.append(Series(a.name, [float(k) for k in ks], ys, lows, highs, color(i)))
        rows += [[escape(a.name), str(k), fmt(r.value), f"[{fmt(r.ci_low)}, {fmt(r.ci_high)}]" if r.ci_low is not None
                  and r.ci_high is not None else "n/a", str(r.tasks_used)] for k, r in zip(ks, results)]  # fmt: skip
    if not series:
        return section("pass-at-k", "pass@k", '<p class="empty">No per-rollout values: pass the rollouts file, or aggregate with rollout_infos.</p>')
    chart = _svg.line_chart("pass-at-k", "unbiased pass@k with 95% interval", series, "k", "pass@k", log_x=len(series[0].x) > MAX_PASS_K)
    details = f"<details><summary>values</summary>{table(['agent', 'k', 'pass@k', '95% interval', 'tasks used'], rows, 'num')}</details>"
    note = f"A rollout passes when its {value_field} is at least 1; tasks with fewer than k rollouts are left out of pass@k."
    return section("pass-at-k", "pass@k", chart + details, note)


def repeats(agents: Sequence[AgentData], value_field: str) -> str:
    """Each repeat's mean over tasks with its t interval: drift or a bad repeat shows here."""
    series = []
    for i, a in enumerate(agents):
        if not a.repeats:
            continue
        bounded = unit_bounded(a, value_field, value_field)
        low, high = zip(*(cut(r["ci_low"], r["ci_high"], bounded) for r in a.repeats))
        series.append(Series(a.name, [r["index"] for r in a.repeats], [r["mean"] for r in a.repeats], low, high, color(i)))
    if not series:
        return section("repeats", "Repeats", '<p class="empty">One rollout index only: no repeat-level metrics.</p>')
    chart = _svg.line_chart("repeats", f"mean/{value_field} per repeat", series, "rollout index", f"mean/{value_field}")
    rows = []
    for a in agents:
        m = a.agent_metrics
        keys = [f"{s}_across_repeats/mean/{value_field}" for s in ("mean", "std", "ci_low_95", "ci_high_95")]
        if keys[0] in m:
            shown = (shown_value(a, k, m.get(k, ""), value_field) for k in keys)
            rows.append([escape(a.name), *(_num(v) + ("*" if was_cut else "") for v, was_cut in shown)])
    tab = table(["agent", "mean across repeats", "std across repeats", "95% low", "95% high"], rows, "num")
    note = f"repeat_level_metrics: one point per rollout index (the first {MAX_REPEATS}), 95% t interval over tasks." + BOUNDED_NOTE
    return section("repeats", "Repeats", chart + tab, note)


def paired(agents: Sequence[AgentData], value_field: str, gates: Gates) -> str:
    """compare's differences (METHOD: paired by task) and its verdict on the first agent."""
    cols = {a.name: a.rollouts for a in agents if a.rollouts is not None}
    names = [a.name for a in agents if a.name in cols]
    without = [a.name for a in agents if a.rollouts is None]
    why = ""
    if without and (len(names) < 2 or any(a.compared for a in agents)):  # (a --compare file's agents are the ones gated against)
        why = (f"no per-rollout values for {', '.join(without)}: its metrics file was written without rollout_infos "
               "(--no-rollout-infos); give its rollouts file (report METRICS ROLLOUTS), or aggregate it without that flag")  # fmt: skip
    elif len(names) < 2:
        why = f"one agent only ({names[0]}): a verdict compares two" if names else "no agent"
    if not why:
        try:
            method = get_method(METHOD)
            report = method.run(cols, names, CompareOptions(("mean_reward",), (value_field,)))
        except InvalidInputError as exc:
            why = str(exc)
    if why:
        gates.unreachable = why if gates.asked else None
        return section("paired", "Paired differences", f'<p class="empty">No paired differences: {escape(why)}.</p>')
    gated = _gated_pairs([a for a in agents if a.name in cols])
    verdict = gate(report, names[0], gates.fail_if_worse_by, gates.require_better_by, pairs=gated)
    gates.status = verdict.status if verdict is not None else None
    if verdict is None and gates.asked:
        gates.unreachable = "none of the agents compared is one the rules gate"
    status: dict[str, str] = {}  # the worst check of each comparison
    for check in verdict.checks if verdict is not None else ():
        status[check.comparison] = max(status.get(check.comparison, ""), check.status, key=lambda s: STATUS_RANK[s])
    rows = [(f"{c.agent_a} - {c.agent_b}", c.difference, c.ci_low, c.ci_high, STATUS_COLOR.get(status.get(c.name, ""), "#57606a"))
            for c in report.comparisons]  # fmt: skip
    ref = -gates.fail_if_worse_by if gates.fail_if_worse_by is not None else gates.require_better_by or 0.0
    chart = _svg.forest("paired-differences", "Paired differences with 95% interval", rows, f"mean_reward({value_field}): A - B", ref)
    head = ["A - B", *method.columns(report)]
    body = [[escape(c.agent_a + " - " + c.agent_b), *map(_cell, method.cells(c))] for c in report.comparisons]
    html = chart + table(head, body, "num")
    if verdict is not None:
        checks = "".join(f"<li><b>{c.status}</b> {escape(c.rule)} {c.margin:g}: {escape(c.comparison)}: {escape(c.reason)}</li>" for c in verdict.checks)
        html = f'<p class="verdict v-{verdict.status.lower()}" id="verdict">Verdict: {verdict.status}</p><ul>{checks}</ul>' + html
    note = f"gym-metrics compare, {method.describe(report)}; "
    if verdict is None:
        note += "no verdict (--compare, --fail-if-worse-by or --require-better-by asks for one)."
    else:
        whom = "each agent against the --compare file's" if gated is not None else f"{names[0]} against the others"
        note += (f"the verdict gates {whom} as `compare` does: with several checks each uses a Bonferroni-adjusted "
                 "interval, wider than the 95% one drawn (docs/statistics.md#verdicts). Dashed line: the gate's margin.")  # fmt: skip
    return section("paired", "Paired differences", html, note, wide=True)


def _cell(value: Cell) -> str:
    """A method's table cell: an interval as [low, high], a count as is, text escaped."""
    if isinstance(value, tuple):
        return f"[{fmt(value[0])}, {fmt(value[1])}]"
    if isinstance(value, str):
        return escape(value)
    return str(value) if isinstance(value, int) else fmt(value)


def _gated_pairs(agents: Sequence[AgentData]) -> set[tuple[str, str]] | None:
    """With a --compare file: each agent of the first file against its namesake in the other,
    or against every agent there when no names match; None without one (the first agent
    against the others, as `compare` gates)."""
    mine, theirs = [a for a in agents if not a.compared], [a for a in agents if a.compared]
    if not theirs:
        return None
    namesakes = {(a.name, b.name) for a in mine for b in theirs if a.own_name == b.own_name}
    return namesakes or {(a.name, b.name) for a in mine for b in theirs}
