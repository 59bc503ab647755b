"""`gym-metrics compare`: paired differences between agents over their common tasks, with a
PASS / FAIL / INCONCLUSIVE verdict for CI gating (exit 0 / 1 / 3)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import InputFileError, positive_int

VERDICT_HELP = "exit 0 PASS, 1 FAIL, 3 INCONCLUSIVE (docs/statistics.md#verdicts)"


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("compare", help="paired differences between agents over their common tasks; verdicts for CI")
    p.add_argument("rollouts", type=Path, nargs="+", metavar="ROLLOUTS",
                   help="one rollouts JSONL with the agents, or two files (A then B) with one agent each")  # fmt: skip
    p.add_argument("--agents", nargs="+", metavar="AGENT", help="report A - B (and every other pair, in this order)")
    p.add_argument(
        "--reducer", "--metric", dest="reducer", nargs="+", default=["mean_reward"],
        help="mean_reward, pass_rate, pass@k, pass^k or any registered reducer; several allowed (--metric is the old spelling)",
    )  # fmt: skip
    p.add_argument("--field", nargs="+", default=["reward"], help="the per-rollout value field(s)")
    p.add_argument("--method", choices=["paired", "bootstrap"], default="paired",
                   help="paired: clustered paired t test (default); bootstrap: paired bootstrap (two agents, one metric)")  # fmt: skip
    p.add_argument("--adjust", choices=["holm", "bh"], default="holm", help="p-value adjustment over all comparisons")
    p.add_argument("--alpha", type=_probability, default=0.05, help="test level; intervals are at 1 - alpha (the bootstrap interval is always 95%%)")
    p.add_argument("--power", type=_probability, default=0.8, help="power for the minimum detectable effect")
    p.add_argument("--fail-if-worse-by", type=_margin, metavar="DELTA", help=f"FAIL if A is worse than B by more than DELTA; {VERDICT_HELP}")
    p.add_argument("--require-better-by", type=_margin, metavar="DELTA", help=f"PASS only if A beats B by more than DELTA; {VERDICT_HELP}")
    p.add_argument("--common-tasks", action="store_true", help="with two files, compare on the tasks both hold")
    p.add_argument("--resamples", type=positive_int, default=10_000, help="paired bootstrap resamples (--method bootstrap)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (same seed, same interval)")
    p.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip bad lines")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run, check_inputs=check_files)


def _probability(text: str) -> float:
    value = float(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _margin(text: str) -> float:
    value = float(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def check_files(ns: argparse.Namespace) -> None:
    """The same message as every other command's missing input."""
    for path in ns.rollouts if isinstance(ns.rollouts, list) else [ns.rollouts]:
        if not path.exists():
            raise InputFileError(f"input file not found: {path}")
        if not path.is_file():
            raise InputFileError(f"input is not a file: {path}")


def run(ns: argparse.Namespace) -> int:
    from gym_metrics._compare_inputs import load_agents

    agents, names = load_agents(ns.rollouts, ns.agents, common_tasks=ns.common_tasks, on_bad_line=ns.on_bad_line)
    if ns.method == "bootstrap":
        return _bootstrap(ns, agents, names)
    return _paired(ns, agents, names)


def _paired(ns: argparse.Namespace, agents: Any, names: list[str]) -> int:
    from gym_metrics._compare_inputs import gate
    from gym_metrics.paired import compare_paired

    where = f" in {ns.rollouts[0]}" if len(ns.rollouts) == 1 else ""
    report = compare_paired(
        agents, names, ns.reducer, ns.field, adjust=ns.adjust, alpha=ns.alpha, power=ns.power, where=where
    )
    verdict = gate(report, names[0], ns.fail_if_worse_by, ns.require_better_by)
    if ns.json:
        _print_json({**report.to_dict(), "verdict": verdict.to_dict() if verdict else None})
    else:
        from gym_metrics.cli._compare_text import paired_text, verdict_text

        print(paired_text(report))
        if verdict:
            print(verdict_text(verdict))
    return verdict.exit_code if verdict else 0


def _bootstrap(ns: argparse.Namespace, agents: Any, names: list[str]) -> int:
    from gym_metrics.compare import compare_agents
    from gym_metrics.errors import InvalidInputError
    from gym_metrics.statistics import combine, fail_if_worse_by, require_better_by

    if len(names) != 2 or len(ns.reducer) != 1 or len(ns.field) != 1:
        raise InvalidInputError("--method bootstrap compares two agents on one --reducer and one --field")
    result = compare_agents(
        agents, names[0], names[1], metric=ns.reducer[0], resamples=ns.resamples, seed=ns.seed, field=ns.field[0]
    )
    label = f"{result.metric}({ns.field[0]}): {names[0]} - {names[1]}"
    checks = [rule(delta, result.ci_low, result.ci_high, label)
              for rule, delta in ((fail_if_worse_by, ns.fail_if_worse_by), (require_better_by, ns.require_better_by))
              if delta is not None]  # fmt: skip
    verdict = combine(checks, result.confidence) if checks else None
    if ns.json:
        _print_json({**result.to_dict(), **({"verdict": verdict.to_dict()} if verdict else {})})
    else:
        from gym_metrics.cli._compare_text import verdict_text

        print(result.summary())
        if verdict:
            print(verdict_text(verdict))
    return verdict.exit_code if verdict else 0


def _print_json(data: dict[str, Any]) -> None:
    import orjson

    print(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode())
