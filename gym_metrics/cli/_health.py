"""`gym-metrics health ROLLOUTS... [-o DIR] [--ignore CHECK] [--metrics FILE]`: NeMo Gym's rollout
health checks over rollout files, their counts optionally into a metrics file (gym_metrics.health;
docs/health.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gym_metrics.errors import ExitCode, FieldViolation, GymMetricsError, InvalidInputError

ORDER = 48  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("health", help="NeMo Gym's 14 rollout health checks: each rollout healthy, unhealthy or unobserved")
    p.add_argument("rollouts", type=Path, nargs="+", help="rollout files (collect --trajectory gives the checks their evidence)")
    p.add_argument("-o", "--output-dir", type=Path, help="where quality_summary.json and rollout_verdicts.jsonl go (default: the first file's folder)")
    p.add_argument("--ignore", action="append", default=[], metavar="CHECK[,CHECK]", help="checks to skip, by id (repeatable; NeMo Gym's ignored_checks)")
    p.add_argument("--json", action="store_true", help="print the quality summary as JSON instead of the one-line report")
    p.add_argument("--metrics", type=Path, metavar="FILE", help="also write the counts per agent into this metrics file (its `health` section)")
    p.add_argument("--agent", metavar="NAME", help="with --metrics: the agent of rows that name none (default: the file's only agent)")
    p.add_argument("--workers", type=int, metavar="N", help="processes checking a large run (default: one per core, at most 8; 1: none)")
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    import orjson

    from gym_metrics._util.atomic import check_output_dir
    from gym_metrics.health import check_health

    ignore = [c for given in ns.ignore for c in given.split(",")]
    if ns.agent is not None and ns.metrics is None:  # (it named the agent of no file)
        raise InvalidInputError("--agent names the agent of the counts written into --metrics", [FieldViolation("--metrics", "not given")])
    try:
        if ns.metrics is not None and not ns.metrics.is_file():
            raise FileNotFoundError(f"metrics file not found: {ns.metrics}")
        if ns.output_dir is not None:
            check_output_dir(ns.output_dir, "--output-dir")
        health = check_health(ns.rollouts, output_dir=ns.output_dir, ignore=ignore, workers=ns.workers)
        if ns.metrics is not None:
            health.add_to_metrics(ns.metrics, ns.agent)
    except (ValueError, FileNotFoundError, GymMetricsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(orjson.dumps(health.summary).decode() if ns.json else health.line())
    return ExitCode.OK


def health_after(rollouts: Path, metrics: Path, default_agent: str | None) -> None:
    """collect --health: the reports beside the rollouts, the counts per agent into the metrics
    file, NeMo Gym's line printed."""
    from gym_metrics._util.atomic import check_output_dir
    from gym_metrics.health import check_health

    health = check_health(rollouts)
    health.add_to_metrics(metrics, default_agent)
    print(health.line())
