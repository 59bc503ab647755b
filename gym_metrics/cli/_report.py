"""`gym-metrics report`: one self-contained HTML page of a metrics file (docs/report.md)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import InputFileError
from gym_metrics.errors import ExitCode
from gym_metrics.cli._compare import _margin as margin  # the same check as compare's flags


ORDER = 90  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML report of a metrics file (charts, tasks, pass@k)")
    p.add_argument("metrics", type=Path, help="<stem>_aggregate_metrics.json (from aggregate or collect)")
    p.add_argument("rollouts", type=Path, nargs="?", help="its rollouts JSONL: per-rollout values when the metrics omit rollout_infos")
    p.add_argument("--compare", type=Path, metavar="OTHER_METRICS", help="a second metrics file: its agents beside these, paired")
    p.add_argument("-o", "--output", type=Path, help="default: <stem>_report.html beside the metrics file")
    p.add_argument("--field", default="reward", help="the per-rollout value drawn (default reward)")
    p.add_argument("--fail-if-worse-by", type=margin, metavar="DELTA",
                   help="show a verdict with this rule, as in compare (with --compare and neither rule: 0); without a rule or --compare, no verdict")  # fmt: skip
    p.add_argument("--require-better-by", type=margin, metavar="DELTA", help="show a verdict: PASS only if the first agent beats the others by more")
    p.set_defaults(func=run, check_inputs=check_files)


def check_files(ns: argparse.Namespace) -> None:
    """The same message as every other command's missing input; a rollouts file given where
    its metrics file goes is named as such."""
    for path in (ns.metrics, ns.compare):
        if path is not None and not path.is_file():
            raise InputFileError(f"input file not found: {path}" if not path.exists() else f"input is not a file: {path}")
        if path is not None and path.suffix == ".jsonl":
            raise InputFileError(
                f"{path} is a rollouts file: report reads its metrics, <stem>_aggregate_metrics.json "
                f"(written by collect, or `gym-metrics aggregate {path}`), and takes the rollouts second"
            )


def run(ns: argparse.Namespace) -> int:
    from gym_metrics.report import Gates, build_report

    started = time.perf_counter()
    gates = Gates(ns.fail_if_worse_by, ns.require_better_by)
    out = build_report(ns.metrics, ns.output, rollouts=ns.rollouts, compare=ns.compare, field=ns.field, gates=gates)
    size = out.stat().st_size / 1e6
    print(f"report ({size:.1f} MB) in {time.perf_counter() - started:.2f}s -> {out}")
    if gates.status is not None:
        print(f"verdict: {gates.status}")
    elif gates.unreachable is not None:  # a rule asked for a verdict: none is an error, never a silent pass
        print(f"error: no verdict: {gates.unreachable}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    return {"FAIL": 1, "INCONCLUSIVE": 3}.get(gates.status or "", 0)  # as compare exits


def add_report_flag(p: argparse.ArgumentParser) -> None:
    """`--report` on aggregate and collect."""
    p.add_argument("--report", action="store_true", help="also write <stem>_report.html beside the metrics file (gym-metrics report)")


def report_after(ns: argparse.Namespace, metrics_path: Path | None, rollouts: Path | None = None) -> None:
    """With --report, the report beside the written metrics file; `rollouts` is read for
    per-rollout values when the metrics were written without rollout_infos."""
    if not getattr(ns, "report", False) or metrics_path is None or not Path(metrics_path).is_file():
        return
    from gym_metrics.report import build_report

    out = build_report(metrics_path, rollouts=rollouts if getattr(ns, "no_rollout_infos", False) else None)
    if not getattr(ns, "quiet", False):
        print(f"report   -> {out}")
