"""`gym-metrics aggregate`: a rollouts file's metrics in-process (no server)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import (
    SHOW_VIOLATIONS,
    agent_name,
    fmt,
    format_key_metrics,
    format_table,
    non_negative_int,
    print_value_notes,
)
from gym_metrics.cli._export import add_export_flags, export_after


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("aggregate", help="aggregate a rollouts JSONL in-process (no server)")
    p.add_argument("rollouts", type=Path, help="rollouts JSONL: one verify response per line")
    p.add_argument("-o", "--output", type=Path, help="default: <stem>_aggregate_metrics.json beside the input")
    p.add_argument("--env", metavar="TARGET", help="use this environment's compute_metrics / get_key_metrics")
    p.add_argument("--no-rollout-infos", action="store_true", help="omit per-rollout entries (much smaller file)")
    p.add_argument("--expected-rollouts", type=non_negative_int, default=0, metavar="K", help="rollouts each task should have")
    p.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip (and report)")
    p.add_argument("--agent", metavar="NAME", type=agent_name, help="the agent of rows without an agent_ref")
    p.add_argument("--count-errors-as-zero", action="store_true", help="a failed verify (_gm_error) counts as reward 0")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the output path")
    p.add_argument("--economics", action="store_true", help="add tokens / wall time / cost per agent (`economics`)")
    p.set_defaults(func=run)
    add_export_flags(p)


def run(ns: argparse.Namespace) -> int:
    from gym_metrics._memory import fewer_gc_passes
    from gym_metrics.aggregate import AggregateOptions, aggregate_file

    compute = keys = columns = columnar = None
    if ns.env:
        from gym_metrics import resolve_server

        env = resolve_server(ns.env)()
        compute = env.compute_metrics if env.wants_rows else None
        keys = env.get_key_metrics
        columns = env.column_metrics_hook()
        columnar = env.columnar_metrics_hook()
    options = AggregateOptions(
        include_rollout_infos=not ns.no_rollout_infos,
        expected_rollouts_per_task=ns.expected_rollouts,
        count_errors_as_zero=ns.count_errors_as_zero,
    )
    started = time.perf_counter()
    econ: dict[str, dict[str, float | int]] = {}
    with fewer_gc_passes():
        out, results, rollouts = aggregate_file(
            ns.rollouts,
            ns.output,
            options=options,
            compute_metrics=compute,
            get_key_metrics=keys,
            column_metrics=columns,
            compute_metrics_columns=columnar,
            on_bad_line=ns.on_bad_line,
            extra=_economics_section(econ) if ns.economics else None,
            default_agent=ns.agent,
            keep_rows=False,
        )
    elapsed = time.perf_counter() - started
    for bad in rollouts.bad_lines[:SHOW_VIOLATIONS]:
        print(f"warning: skipped {ns.rollouts}:{bad}", file=sys.stderr)
    if len(rollouts.bad_lines) > SHOW_VIOLATIONS:
        print(f"warning: ... and {len(rollouts.bad_lines) - SHOW_VIOLATIONS} more bad lines", file=sys.stderr)
    if ns.quiet:
        print(out)
        return export_after(ns, out, 0)
    print(format_key_metrics({r.agent_name: r.key_metrics for r in results}))
    if econ:
        print("\n" + format_economics(econ) + "\n")
    print_value_notes(results)
    skipped = f", {len(rollouts.bad_lines)} bad lines skipped" if rollouts.bad_lines else ""
    print(f"{rollouts.rows_read} rollouts, {len(results)} agents in {elapsed:.2f}s{skipped} -> {out}")
    return export_after(ns, out, 0)


def _economics_section(into: dict[str, dict[str, float | int]]) -> Any:
    """aggregate_file's `extra` hook: each agent's economics, kept in `into` for the table."""
    from gym_metrics.economics import economics

    def section(agent: str, cols: Any) -> dict[str, Any]:
        into[agent] = economics(cols)
        return {"economics": into[agent]}

    return section


def format_economics(by_agent: dict[str, dict[str, float | int]]) -> str:
    """One row per (agent, usage field): per-rollout mean / p50 / p90, total, and how many
    rollouts lack it; then each agent's cost and tokens per passing task."""
    from gym_metrics.economics import PREFIX

    rows = []
    notes = []
    for agent in sorted(by_agent):
        econ = by_agent[agent]
        fields = [k[len(PREFIX) : -len("/missing_rollouts")] for k in econ if k.endswith("/missing_rollouts")]
        for f in fields:
            stats = [econ.get(f"{PREFIX}{f}/{s}") for s in ("mean", "p50", "p90", "total", "rollouts", "missing_rollouts")]
            rows.append([agent, f, *(fmt(v) for v in stats)])
        per_pass = [
            f"{label} {fmt(econ[PREFIX + key])}"
            for key, label in (("cost_per_passing_task", "cost"), ("tokens_per_passing_task", "tokens"))
            if PREFIX + key in econ
        ]
        passing = f"{econ[PREFIX + 'passing_tasks']} of {econ[PREFIX + 'tasks']} tasks pass"
        notes.append(f"{agent}: {passing}" + (f"; per passing task: {', '.join(per_pass)}" if per_pass else ""))
    table = format_table(["agent", "field", "mean", "p50", "p90", "total", "rollouts", "missing"], rows)
    return "\n".join(["economics (per rollout; missing = rollouts without the field, not counted as 0)", table, *notes])
