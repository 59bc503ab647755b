"""`gym-metrics plan`: tasks x repeats a planned paired comparison needs to detect a given
difference, from a baseline run's variance components."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import InputFileError, positive_float, positive_int, warn_bad_lines
from gym_metrics.cli._compare import _probability
from gym_metrics.errors import FieldViolation, InvalidInputError


ORDER = 60  # its place in `gym-metrics --help` (cli/_discovery.py)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("plan", help="tasks x repeats a planned comparison needs (power analysis from a baseline run)")
    p.add_argument("--baseline-rollouts", type=Path, required=True, metavar="FILE", help="rollouts JSONL of a baseline run")
    p.add_argument("--mde", type=positive_float, required=True, help="the smallest true difference to detect, e.g. 0.02")
    p.add_argument("--repeats", type=positive_int, help="mark (and add) this number of repeats in the table")
    p.add_argument("--power", type=_probability, default=0.8, help="probability of detecting a true difference of --mde")
    p.add_argument("--alpha", type=_probability, default=0.05, help="two-sided test level")
    p.add_argument("--agents", nargs="+", metavar="AGENT",
                   help="the baseline agent, or two agents of an earlier A/B run (their measured difference)")  # fmt: skip
    p.add_argument("--field", default="reward", help="the per-rollout value field")
    p.add_argument("--correlation", type=float,
                   help="with one baseline agent: assumed correlation of per-task scores between the two agents (default 0.5; "
                   "two agents' is measured)")  # fmt: skip
    p.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip bad lines")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=run, check_inputs=_check_baseline)


def _check_baseline(ns: argparse.Namespace) -> None:
    path = ns.baseline_rollouts
    if not path.exists():
        raise InputFileError(f"input file not found: {path}")
    if not path.is_file():
        raise InputFileError(f"input is not a file: {path}")


def run(ns: argparse.Namespace) -> int:
    from gym_metrics.compare import DEFAULT_CORRELATION, DEFAULT_REPEATS, plan_from_baseline
    from gym_metrics.rollouts import read_rollouts

    if ns.correlation is not None and ns.agents is not None and len(ns.agents) == 2:  # (it was ignored: two agents' difference is measured)
        raise InvalidInputError("--correlation is assumed for one baseline agent", [FieldViolation("--agents", "two agents given: their correlation is measured")])
    read = read_rollouts(ns.baseline_rollouts, on_bad_line=ns.on_bad_line)
    warn_bad_lines(ns.baseline_rollouts, read.bad_lines)
    agents = read.agents
    repeats = [*DEFAULT_REPEATS, *([ns.repeats] if ns.repeats else [])]
    result = plan_from_baseline(
        agents, ns.agents or [], ns.mde, field=ns.field, repeats=repeats, alpha=ns.alpha, power=ns.power,
        correlation=DEFAULT_CORRELATION if ns.correlation is None else ns.correlation,
    )  # fmt: skip
    if ns.json:
        import orjson

        print(orjson.dumps({"baseline": str(ns.baseline_rollouts), **result.to_dict()}, option=orjson.OPT_INDENT_2).decode())
    else:
        from gym_metrics.cli._compare_text import plan_text

        print(plan_text(result, ns.repeats))
    return 0
