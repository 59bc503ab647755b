"""What `compare` and `plan` read and decide beyond the statistics: agents from one rollouts
file or two (one agent each, tasks matched by `_ng_task_index`), and the CI-gating verdict over
a paired report."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

import numpy as np

from gym_metrics.aggregate import TASK_KEY, OnBadLine, RolloutColumns, read_rollouts
from gym_metrics.errors import InvalidInputError
from gym_metrics.paired import PairedReport
from gym_metrics.statistics import Check, Verdict, combine, fail_if_worse_by, require_better_by, t_interval


def load_agents(
    paths: Sequence[Path], names: Sequence[str] | None, *, common_tasks: bool = False, on_bad_line: OnBadLine = "fail"
) -> tuple[dict[str, RolloutColumns], list[str]]:
    """(columns by agent, the agents to compare in order). One file: every agent in it, `names`
    required. Two files: one agent each, named by `names` if given (else their own names, or the
    file names when those clash); their task sets must match unless `common_tasks`."""
    if len(paths) == 1:
        if not names:
            raise InvalidInputError(f"{paths[0]}: name the agents to compare with --agents A B [...]")
        return dict(read_rollouts(paths[0], on_bad_line=on_bad_line).agents), list(names)
    if len(paths) != 2:
        raise InvalidInputError(f"compare takes one rollouts file, or two with one agent each; got {len(paths)} files")
    if names and len(names) != 2:
        raise InvalidInputError(f"with two rollout files --agents names their two agents; got {len(names)} names")
    cols = [_single_agent(p, on_bad_line) for p in paths]
    labels = list(names) if names else [name for name, _ in cols]
    if labels[0] == labels[1]:
        labels = [str(p) for p in paths]
    if not common_tasks:
        _same_tasks(paths, cols[0][1], cols[1][1])
    return {labels[0]: cols[0][1], labels[1]: cols[1][1]}, labels


def _single_agent(path: Path, on_bad_line: OnBadLine) -> tuple[str, RolloutColumns]:
    agents = read_rollouts(path, on_bad_line=on_bad_line).agents
    if len(agents) != 1:
        listed = ", ".join(sorted(agents)) or "none"
        raise InvalidInputError(f"{path}: holds {len(agents)} agents ({listed}); with two files each must hold one agent")
    return next(iter(agents.items()))


def _same_tasks(paths: Sequence[Path], a: RolloutColumns, b: RolloutColumns) -> None:
    """Refuse two files whose task sets differ: a comparison of different task sets is not
    paired, and silently dropping tasks hides that the runs differ."""
    ta, tb = np.unique(a.task_index), np.unique(b.task_index)
    only_a, only_b = np.setdiff1d(ta, tb, assume_unique=True), np.setdiff1d(tb, ta, assume_unique=True)
    if not (len(only_a) or len(only_b)):
        return
    shown = ", ".join(map(str, np.concatenate([only_a, only_b])[:5].tolist()))
    common = len(ta) - len(only_a)
    raise InvalidInputError(
        f"{paths[0]} and {paths[1]} hold different tasks ({TASK_KEY}): {len(only_a)} only in {paths[0]}, "
        f"{len(only_b)} only in {paths[1]} (e.g. {shown}); --common-tasks compares the {common} both hold"
    )


def gate(
    report: PairedReport,
    candidate: str,
    fail_if_worse_by_delta: float | None,
    require_better_by_delta: float | None,
    *,
    pairs: Collection[tuple[str, str]] | None = None,
) -> Verdict | None:
    """The verdict on every comparison of `candidate` (the first agent) against the others, or
    on the comparisons (A, B) in `pairs` when given (the report's --compare: each agent of the
    file against its counterpart in the other); None without a rule.

    With m gated comparisons and checks, each interval is at confidence 1 - alpha / m
    (Bonferroni), so the chance that any check is decided wrongly stays at most alpha; with one
    comparison it is the report's own interval."""
    deltas = [(fail_if_worse_by, fail_if_worse_by_delta), (require_better_by, require_better_by_delta)]
    rules = [(rule, d) for rule, d in deltas if d is not None]
    if not rules:
        return None
    if pairs is None:
        gated = [c for c in report.comparisons if c.agent_a == candidate]  # pairs keep the order named
    else:
        gated = [c for c in report.comparisons if (c.agent_a, c.agent_b) in pairs]
    if not gated:
        return None
    m = len(gated) * len(rules)
    confidence = 1 - (1 - report.confidence) / m
    checks: list[Check] = []
    for c in gated:
        low, high = (c.ci_low, c.ci_high) if m == 1 else t_interval(c.difference, c.standard_error, c.df, confidence)
        if c.standard_error == 0:
            low = high = c.difference
        checks += [rule(delta, low, high, c.name) for rule, delta in rules]
    return combine(checks, confidence)

