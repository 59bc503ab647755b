"""`gym-metrics health ROLLOUTS... [-o DIR] [--ignore CHECK]`: NeMo Gym's rollout health checks
over rollout files (gym_metrics.health; docs/health.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gym_metrics.errors import ExitCode

ORDER = 48  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("health", help="NeMo Gym's 14 rollout health checks: each rollout healthy, unhealthy or unobserved")
    p.add_argument("rollouts", type=Path, nargs="+", help="rollout files (collect --trajectory gives the checks their evidence)")
    p.add_argument("-o", "--output-dir", type=Path, help="where quality_summary.json and rollout_verdicts.jsonl go (default: the first file's folder)")
    p.add_argument("--ignore", action="append", default=[], metavar="CHECK[,CHECK]", help="checks to skip, by id (repeatable; NeMo Gym's ignored_checks)")
    p.add_argument("--json", action="store_true", help="print the quality summary as JSON instead of the one-line report")
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    import orjson

    from gym_metrics.health import check_health

    ignore = [c for given in ns.ignore for c in given.split(",")]
    try:
        health = check_health(ns.rollouts, output_dir=ns.output_dir, ignore=ignore)
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    print(orjson.dumps(health.summary).decode() if ns.json else health.line())
    return ExitCode.OK
