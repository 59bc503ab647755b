"""`gym-metrics aggregate`: a rollouts file's metrics in-process (no server)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from gym_metrics.cli._base import (
    SHOW_VIOLATIONS,
    agent_name,
    fmt,
    format_key_metrics,
    format_table,
    non_negative_int,
    print_value_notes,
    require_module,
    warn_bad_lines,
)
from gym_metrics.cli._export import add_export_flags, export_after
from gym_metrics.cli._report import add_report_flag, report_after


ORDER = 30  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("aggregate", help="aggregate rollouts JSONL in-process (no server), or write a partial to merge")
    p.add_argument("rollouts", type=Path, nargs="+", help="rollouts JSONL: one verify response per line (several: one set)")
    p.add_argument("-o", "--output", type=Path, help="default: <stem>_aggregate_metrics.json beside the (first) input")
    p.add_argument(
        "--partial-out", type=Path, metavar="P.parquet",
        help="write the rows' partial state instead of metrics; `gym-metrics merge` combines partials",
    )  # fmt: skip
    p.add_argument("--with-rows", action="store_true", help="with --partial-out: keep every row's text (for --env compute_metrics)")
    p.add_argument(
        "--ray", nargs="?", const="", metavar="ADDRESS",
        help="read the inputs as Ray tasks across a cluster (default: a local Ray), then merge exactly; needs gym-metrics[ray]",
    )  # fmt: skip
    add_aggregation_options(p)
    p.add_argument(
        "--count-failure-classes-as-zero", nargs="+", default=[], metavar="CLASS",
        help="score the rollouts of these classes (judge_failed, ...) in each input's failures sidecar (<stem>_failures.jsonl) "
        "0 in the metrics, the files unchanged (NeMo Gym's gym eval aggregate +count_failure_classes_as_zero)",
    )  # fmt: skip
    p.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip (and report)")
    p.add_argument("--agent", metavar="NAME", type=agent_name, help="the agent of rows without an agent_ref")
    p.set_defaults(func=run)
    add_export_flags(p)
    add_report_flag(p)
    exporters = p.get_default("check_inputs")

    def check(ns: argparse.Namespace) -> None:  # flags that do not go together first: no extra installed for a refused run
        _check_flags(ns)
        exporters(ns)

    p.set_defaults(check_inputs=check)


def add_aggregation_options(p: argparse.ArgumentParser) -> None:
    """The options that shape the metrics file (aggregate and merge share them)."""
    p.add_argument("--env", metavar="TARGET", help="use this environment's compute_metrics / get_key_metrics")
    p.add_argument("--no-rollout-infos", action="store_true", help="omit per-rollout entries (much smaller file)")
    p.add_argument("--expected-rollouts", type=non_negative_int, default=0, metavar="K", help="rollouts each task should have")
    p.add_argument("--count-errors-as-zero", action="store_true", help="a failed verify (_gm_error) counts as reward 0")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the output path")
    p.add_argument("--economics", action="store_true", help="add tokens / wall time / cost per agent (`economics`)")


def run(ns: argparse.Namespace) -> int:
    from gym_metrics._util.memory import fewer_gc_passes
    from gym_metrics.aggregate import aggregate_file, aggregate_rollouts, combine, output_path_for, refuse_files_given_twice, with_perf_summaries
    from gym_metrics.errors import FieldViolation, InvalidInputError

    refuse_files_given_twice(ns.rollouts, "rollouts")  # (_check_flags ran as the command's check_inputs)
    if ns.ray is not None:  # (exit 2 before any work, not an ImportError at the end)
        require_module("ray", "--ray", "ray", "Ray")
        return _run_on_ray(ns)
    hooks, econ = aggregation_hooks(ns)
    started = time.perf_counter()
    with fewer_gc_passes():
        if ns.partial_out:
            return _write_partial(ns, hooks.get("compute_metrics") is not None, started)
        if len(ns.rollouts) == 1 and not ns.count_failure_classes_as_zero:
            out, results, rollouts = aggregate_file(
                ns.rollouts[0], ns.output, on_bad_line=ns.on_bad_line, default_agent=ns.agent, keep_rows=False, **hooks
            )
        else:
            keep = hooks.get("compute_metrics") is not None
            parts, sources = [_read(path, ns, keep) for path in ns.rollouts], [str(p) for p in ns.rollouts]
            if ns.count_failure_classes_as_zero:
                parts, sources = _with_counted(ns, parts, sources, keep)
            rollouts = combine(parts, sources)
            out = ns.output or output_path_for(ns.rollouts[0])
            hooks["extra"] = with_perf_summaries(rollouts, hooks.get("extra"))
            results = aggregate_rollouts(rollouts, out, **hooks)
    if len(ns.rollouts) == 1 and not ns.count_failure_classes_as_zero:  # (else _read warned)
        warn_bad_lines(ns.rollouts[0], rollouts.bad_lines)
    _note_unscored(ns.rollouts, rollouts)
    code = report(ns, out, results, rollouts.rows_read, len(rollouts.bad_lines), econ, time.perf_counter() - started)
    report_after(ns, out, ns.rollouts[0] if len(ns.rollouts) == 1 else None)
    return export_after(ns, out, code)


def _check_flags(ns: argparse.Namespace) -> None:
    """Flags that do not go together, refused before any work (and before an exporter's extra is looked for)."""
    from gym_metrics.errors import FieldViolation, InvalidInputError

    if ns.with_rows and not ns.partial_out:
        raise InvalidInputError("--with-rows goes with --partial-out")
    if ns.partial_out:  # a partial holds rows, not metrics: these shape the metrics `merge` writes (and exports)
        given = [flag for flag, on in (
            ("-o", ns.output is not None), ("--report", ns.report), ("--economics", ns.economics),
            ("--expected-rollouts", bool(ns.expected_rollouts)), ("--count-errors-as-zero", ns.count_errors_as_zero),
            ("--no-rollout-infos", ns.no_rollout_infos), ("--export", bool(ns.export)),
        ) if on]  # fmt: skip
        if given:
            raise InvalidInputError(f"{', '.join(given)} shape the metrics file, which --partial-out does not write: give them to `gym-metrics merge`")
    if len(ns.rollouts) > 1 and not (ns.output or ns.partial_out):
        raise InvalidInputError("several inputs: name the metrics file with -o")
    if ns.count_failure_classes_as_zero and (ns.partial_out or ns.ray is not None):
        raise InvalidInputError("--count-failure-classes-as-zero reads the inputs' sidecars here", [FieldViolation("--count-failure-classes-as-zero", "not with --partial-out or --ray")])


def _run_on_ray(ns: argparse.Namespace) -> int:
    """Partials by Ray tasks, then `gym-metrics merge` in a fresh process: Ray's driver holds
    gRPC threads, and a process with those never forks the render workers."""
    import subprocess
    import tempfile

    from gym_metrics.aggregate import output_path_for
    from gym_metrics.errors import InvalidInputError
    from gym_metrics.ray import ray_partials

    if ns.partial_out:
        raise InvalidInputError("--ray writes partials and merges them itself; drop --partial-out")
    out = ns.output or output_path_for(ns.rollouts[0])
    with tempfile.TemporaryDirectory(prefix="gym-metrics-ray-") as tmp:
        keep = bool(ns.env)  # a row-wise compute_metrics needs every row; cheap to keep for any --env
        partials = ray_partials(ns.rollouts, tmp, address=ns.ray or None, on_bad_line=ns.on_bad_line, default_agent=ns.agent, keep_rows=keep)
        flags = [*(["--env", ns.env] if ns.env else []), *(["--no-rollout-infos"] if ns.no_rollout_infos else []),
                 "--expected-rollouts", str(ns.expected_rollouts), *(["--count-errors-as-zero"] if ns.count_errors_as_zero else []),
                 *(["--economics"] if ns.economics else []), *(["-q"] if ns.quiet else []),
                 *(["--report"] if ns.report else []), *(f"--export={n}" + (f"={t}" if t else "") for n, t in ns.export)]  # fmt: skip
        merge = [sys.executable, "-m", "gym_metrics.cli", "--log-level", ns.log_level, "merge", *map(str, partials), "-o", str(out), *flags]
        return subprocess.run(merge, check=False).returncode


def _with_counted(ns: argparse.Namespace, parts: list[Any], sources: list[str], keep_rows: bool) -> tuple[list[Any], list[str]]:
    """The inputs and, as one more, their sidecars' failures of the classes asked for, scored 0
    (NeMo Gym's `gym eval aggregate` rule: collector.counted_in_shards); said on stderr."""
    from gym_metrics.collector import counted_in_shards, counted_rows_read, failures_path_for, unmatched_classes

    classes, seen = ns.count_failure_classes_as_zero, set[str]()
    rows = counted_in_shards([(part.agents, failures_path_for(path)) for part, path in zip(parts, ns.rollouts)], classes, ns.agent, seen)
    print(f"aggregate: {len(rows)} failed rollouts counted as 0 in the metrics ({', '.join(classes)}; the files unchanged)", file=sys.stderr)
    for line in unmatched_classes(classes, seen, "aggregate"):
        print(line, file=sys.stderr)
    if not rows:
        return parts, sources
    counted = counted_rows_read(rows, None, "gym-metrics-counted-", ns.agent, keep_rows)
    return [*parts, counted], [*sources, "the failures sidecars' counted rows"]


def _read(path: Path, ns: argparse.Namespace, keep_rows: bool) -> Any:
    from gym_metrics.rollouts import read_rollouts

    rollouts = read_rollouts(path, on_bad_line=ns.on_bad_line, default_agent=ns.agent, keep_rows=keep_rows)
    warn_bad_lines(path, rollouts.bad_lines)
    return rollouts


def _write_partial(ns: argparse.Namespace, env_wants_rows: bool, started: float) -> int:
    from gym_metrics.aggregate import combine, write_partial

    keep = ns.with_rows or env_wants_rows
    rollouts = combine([_read(path, ns, keep) for path in ns.rollouts], [str(p) for p in ns.rollouts])
    out = write_partial(ns.partial_out, rollouts, sources=[str(p) for p in ns.rollouts])
    if ns.quiet:
        print(out)
    else:
        rows = "every row's text" if keep else "sample rows only"
        elapsed = time.perf_counter() - started
        print(f"{rollouts.rows_read} rollouts, {len(rollouts.agents)} agents in {elapsed:.2f}s -> partial {out} ({rows})")
    return 0


def aggregation_hooks(ns: argparse.Namespace) -> tuple[dict[str, Any], dict[str, dict[str, float | int]]]:
    """The engine's keyword arguments from the shared options (environment hooks, options,
    the economics section), and the dict the economics table is collected in."""
    from gym_metrics.aggregate import AggregateOptions

    hooks: dict[str, Any] = {}
    if ns.env:
        from gym_metrics.environments import resolve_server

        env = resolve_server(ns.env)()
        hooks.update(compute_metrics=env.compute_metrics if env.wants_rows else None, get_key_metrics=env.get_key_metrics,
                     column_metrics=env.column_metrics_hook(), compute_metrics_columns=env.columnar_metrics_hook())  # fmt: skip
    hooks["options"] = AggregateOptions(
        include_rollout_infos=not ns.no_rollout_infos,
        expected_rollouts_per_task=ns.expected_rollouts,
        count_errors_as_zero=ns.count_errors_as_zero,
    )
    econ: dict[str, dict[str, float | int]] = {}
    if ns.economics:
        hooks["extra"] = _economics_section(econ)
    return hooks, econ


def _note_unscored(paths: list[Path], rollouts: Any) -> None:
    """Rows with no reward (no `reward` key, or null) count as rollouts but are left out of the
    reward stats, as NeMo Gym's metrics leave them; said on stderr, with an input of no rows."""
    if not rollouts.rows_read:
        print(f"warning: {', '.join(map(str, paths))}: no rollouts: the metrics file lists no agents", file=sys.stderr)
    for name, cols in rollouts.agents.items():
        reward = cols.fields.get("reward")
        unscored = np.ones(len(cols.task_index), dtype=bool) if reward is None else ~reward.present
        text = None if reward is None else (cols.non_numeric or {}).get("reward")  # noted as non-numeric values
        for skipped in (cols.errors != 0 if cols.errors is not None else None, text):
            if skipped is not None:
                unscored &= ~skipped
        if unscored.any():
            print(f"note: {name}: {int(unscored.sum())} of {len(unscored)} rollouts have no reward (no `reward` key, null, or not a number): "
                  "counted as rollouts, left out of the reward stats (did you mean `collect`, which verifies them?)", file=sys.stderr)  # fmt: skip


def report(
    ns: argparse.Namespace, out: Path, results: list[Any], rows: int, bad: int, econ: dict[str, Any], elapsed: float
) -> int:
    """Print what was written (key metrics, economics, value notes), or only its path."""
    if ns.quiet:
        print(out)
        return 0
    print(format_key_metrics({r.agent_name: r.key_metrics for r in results}))
    if econ:
        print("\n" + format_economics(econ) + "\n")
    print_value_notes(results)
    skipped = f", {bad} bad lines skipped" if bad else ""
    print(f"{rows} rollouts, {len(results)} agents in {elapsed:.2f}s{skipped} -> {out}")
    return 0


def _economics_section(into: dict[str, dict[str, float | int]]) -> Any:
    """aggregate_file's `extra` hook: each agent's economics, kept in `into` for the table."""
    from gym_metrics.reducers import economics

    def section(agent: str, cols: Any) -> dict[str, Any]:
        into[agent] = economics(cols)
        return {"economics": into[agent]}

    return section


def format_economics(by_agent: dict[str, dict[str, float | int]]) -> str:
    """One row per (agent, usage field): per-rollout mean / p50 / p90, total, and how many
    rollouts lack it; then each agent's cost and tokens per passing task."""
    from gym_metrics.reducers import ECONOMICS_PREFIX as PREFIX

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
