"""`gym-metrics compare`: the paired difference between two agents over their common tasks."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import positive_int


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("compare", help="paired difference between two agents over their common tasks")
    p.add_argument("rollouts", type=Path, help="rollouts JSONL with both agents")
    p.add_argument("--agents", nargs=2, required=True, metavar=("A", "B"), help="report A - B")
    p.add_argument(
        "--reducer", "--metric", dest="reducer", default="mean_reward",
        help="mean_reward, pass_rate, pass@k, pass^k or any registered reducer (--metric is the old spelling)",
    )  # fmt: skip
    p.add_argument("--resamples", type=positive_int, default=10_000, help="paired bootstrap resamples")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (same seed, same interval)")
    p.add_argument("--field", default="reward", help="the per-rollout reward field")
    p.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip bad lines")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run)


def run(ns: argparse.Namespace) -> int:
    import orjson

    from gym_metrics.compare import compare_agents

    agent_a, agent_b = ns.agents  # --agents takes exactly two
    result = compare_agents(
        ns.rollouts, agent_a, agent_b, metric=ns.reducer, resamples=ns.resamples, seed=ns.seed, field=ns.field,
        on_bad_line=ns.on_bad_line,
    )  # fmt: skip
    if ns.json:
        print(orjson.dumps(result.to_dict(), option=orjson.OPT_INDENT_2).decode())
    else:
        print(result.summary())
    return 0
