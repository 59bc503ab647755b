"""`gym-metrics compare`: paired differences between agents over their common tasks, with a
PASS / FAIL / INCONCLUSIVE verdict for CI gating (exit 0 / 1 / 3)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gym_metrics.cli._base import InputFileError, bounded_int, non_negative_int, reducer_name, warn_bad_lines
from gym_metrics.errors import FieldViolation, InvalidInputError

VERDICT_HELP = "exit 0 PASS, 1 FAIL, 3 INCONCLUSIVE (docs/statistics.md#verdicts)"


ORDER = 50  # its place in `gym-metrics --help` (cli/_discovery.py)


MIN_RESAMPLES = 100
"""Below this a percentile interval is a handful of values: with one resample it excluded its
own estimate."""
MAX_RESAMPLES = 10_000_000
"""Above this the resamples' differences alone pass 80 MB (and a reducer recomputed on each
resample runs for hours): 1,000,000,000 allocated without end."""


def _resamples(text: str) -> int:
    value = int(text)
    if value < MIN_RESAMPLES:
        raise argparse.ArgumentTypeError(f"at least {MIN_RESAMPLES} for a bootstrap interval, got {value}")
    return bounded_int(text, MIN_RESAMPLES, MAX_RESAMPLES, " (each resample's difference is held in memory)")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("compare", help="paired differences between agents over their common tasks; verdicts for CI")
    p.add_argument("rollouts", type=Path, nargs="+", metavar="ROLLOUTS",
                   help="one rollouts JSONL with the agents, or two files (A then B) with one agent each")  # fmt: skip
    p.add_argument("--agents", nargs="+", metavar="AGENT", help="report A - B (and every other pair, in this order)")
    p.add_argument(
        "--reducer", "--metric", dest="reducer", nargs="+", default=["mean_reward"], type=reducer_name,
        help="mean_reward, pass_rate, pass@k, pass^k (k at most 100,000) or any registered reducer; several allowed (--metric is the old spelling)",
    )  # fmt: skip
    p.add_argument("--field", nargs="+", default=["reward"], help="the per-rollout value field(s)")
    p.add_argument("--method", choices=_MethodNames(), metavar="{paired,bootstrap}", default="paired",
                   help="paired: clustered paired t test (default); bootstrap: paired bootstrap (two agents, one metric)")  # fmt: skip
    p.add_argument("--adjust", choices=["holm", "bh"], help="paired method: p-value adjustment over all comparisons (default holm)")
    p.add_argument("--alpha", type=_probability, help="test level (default 0.05); intervals are at 1 - alpha (paired method only: the bootstrap's is always 95%%)")
    p.add_argument("--power", type=_probability, help="paired method: power for the minimum detectable effect (default 0.8)")
    p.add_argument("--fail-if-worse-by", type=_margin, metavar="DELTA", help=f"FAIL if A is worse than B by more than DELTA; {VERDICT_HELP}")
    p.add_argument("--require-better-by", type=_margin, metavar="DELTA", help=f"PASS only if A beats B by more than DELTA; {VERDICT_HELP}")
    p.add_argument("--common-tasks", action="store_true", help="with two files, compare on the tasks both hold (one file's agents are paired on their common tasks anyway)")
    p.add_argument("--resamples", type=_resamples, help=f"paired bootstrap resamples (--method bootstrap; {MIN_RESAMPLES} to {MAX_RESAMPLES:,}; default 10,000)")
    p.add_argument("--seed", type=non_negative_int, help="bootstrap seed (--method bootstrap; same seed, same interval; default 0)")
    p.add_argument("--on-bad-line", choices=["fail", "skip"], default="fail", help="stop or skip bad lines")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.set_defaults(func=run, check_inputs=check_files)


class _MethodNames:
    """--method's choices: every registered compare method (gym_metrics.compare), looked up
    only when a name is checked or listed, so the CLI starts without importing numpy. The
    metavar shows the built-ins."""

    def __contains__(self, name: object) -> bool:
        from gym_metrics.compare import METHODS

        return isinstance(name, str) and METHODS.find(name) is not None

    def __iter__(self) -> Iterator[str]:
        from gym_metrics.compare import method_names

        return iter(sorted(method_names(), key=lambda name: name != "paired"))


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
    """Any registered method (`--method`): its report, then the verdict on the first agent."""
    from gym_metrics.compare import CompareOptions, gate, get_method, load_agents

    if ns.alpha is not None and ns.method == "bootstrap":  # (it printed a 95% interval all the same)
        raise InvalidInputError("--alpha sets the paired method's intervals", [FieldViolation("--alpha", "the bootstrap's interval is always 95%: drop it, or use --method paired")])
    _check_method_flags(ns)
    agents, names = load_agents(ns.rollouts, ns.agents, common_tasks=ns.common_tasks, on_bad_line=ns.on_bad_line, skipped=warn_bad_lines)
    method = get_method(ns.method)
    options = CompareOptions(
        ns.reducer, ns.field, adjust=ns.adjust or "holm", alpha=0.05 if ns.alpha is None else ns.alpha, power=0.8 if ns.power is None else ns.power,
        resamples=10_000 if ns.resamples is None else ns.resamples, seed=0 if ns.seed is None else ns.seed,
        where=f" in {ns.rollouts[0]}" if len(ns.rollouts) == 1 else "",
    )  # fmt: skip
    report = method.run(agents, names, options)
    verdict = gate(report, names[0], ns.fail_if_worse_by, ns.require_better_by)
    if ns.json:
        _print_json(method.to_json(report, verdict.to_dict() if verdict else None))
    else:
        from gym_metrics.cli._compare_text import comparison_text, verdict_text

        print(comparison_text(report))
        if verdict:
            print(verdict_text(verdict))
    return verdict.exit_code if verdict else 0


_UNUSED_BY = {"paired": ("resamples", "seed"), "bootstrap": ("adjust", "power")}
"""The flags a built-in method reads nothing of (a registered method may read any option)."""


def _check_method_flags(ns: argparse.Namespace) -> None:
    """A flag the chosen method does not read, or --common-tasks with one file: refused (each
    was ignored without a word, the output looking as if it had been applied)."""
    given = [f"--{name}" for name in _UNUSED_BY.get(ns.method, ()) if getattr(ns, name) is not None]
    if given:
        other = "bootstrap" if ns.method == "paired" else "paired"
        raise InvalidInputError(f"{', '.join(given)} {'set' if len(given) > 1 else 'sets'} nothing of the {ns.method} method",
                                [FieldViolation("--method", f"{other} reads {' and '.join(given)}: drop {'them' if len(given) > 1 else 'it'}, or use --method {other}")])  # fmt: skip
    if ns.common_tasks and len(ns.rollouts) == 1:
        raise InvalidInputError("--common-tasks matches two files' tasks", [FieldViolation("ROLLOUTS", "one file given: its agents are paired on their common tasks already")])


def _print_json(data: dict[str, Any]) -> None:
    import orjson

    print(orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode())
