"""`gym-metrics check-env`: a NeMo Gym environment on gym-metrics against NeMo Gym itself, on
your rollouts (gym_metrics.testing.check_environment)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from gym_metrics.errors import ExitCode, FieldViolation, InvalidInputError

ORDER = 95  # its place in `gym-metrics --help` (cli/_discovery.py)
SHOWN = 50
"""Differences printed (the count says how many there are in all)."""


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "check-env",
        help="compare a NeMo Gym environment on gym-metrics with NeMo Gym itself (run in its own venv) on your rollouts",
    )
    p.add_argument("--root", type=Path, required=True, help="the folder holding resources_servers/<env>/ (a NeMo Gym checkout or unzipped wheel)")
    p.add_argument("--env", required=True, help="the environment's folder name")
    p.add_argument("--rollouts", type=Path, required=True, help="JSONL of verify request bodies (responses_create_params, response, the task's fields)")
    p.add_argument("--nemo-python", required=True, metavar="PYTHON", help="the python of a venv where nemo-gym is installed")
    p.add_argument(
        "--config", metavar="NAME",
        help="the config under configs/ (default: <env>.yaml, else the first), or a path under --root (benchmarks/<name>/config.yaml)",
    )  # fmt: skip
    p.add_argument("--episodes", action="store_true", help="run each row's episode again, the rollouts' model turns replayed, under NeMo Gym's agent and collect; compare trajectories too")
    p.add_argument(
        "--server", action="append", default=[], metavar="NAME=http://HOST:PORT",
        help="a model server the config names (a judge), called by both sides at that address (repeatable)",
    )  # fmt: skip
    p.set_defaults(func=run)


def _pair(item: str) -> tuple[str, str]:
    name, sep, url = item.partition("=")
    if not sep or not name:
        raise InvalidInputError("bad --server", [FieldViolation("--server", f"{item!r}: expected NAME=http://HOST:PORT")])
    return name, url


def run(ns: argparse.Namespace) -> int:
    from gym_metrics.testing import check_environment

    servers = dict(_pair(item) for item in ns.server)
    report = asyncio.run(check_environment(ns.root, ns.env, ns.rollouts, ns.nemo_python, ns.config, episodes=ns.episodes, servers=servers))
    for line in report.differences[:SHOWN]:
        print(line)
    if len(report.differences) > SHOWN:
        print(f"... and {len(report.differences) - SHOWN} more")
    every = "every row, its trajectory" if ns.episodes else "every row"
    verdict = f"equal to NeMo Gym's ({every} and every metrics key)" if report.equal else f"{len(report.differences)} differences from NeMo Gym's"
    refused = f" ({report.refused} rows refused by both: not verify requests NeMo Gym takes)" if report.refused else ""
    print(f"{report.env}: {report.rows} rows, {verdict}{refused}")
    return ExitCode.OK if report.equal else ExitCode.FAILED
