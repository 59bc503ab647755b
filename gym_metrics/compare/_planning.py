"""`gym-metrics plan`: how many tasks x repeats a planned paired comparison needs, from the
variance components of a baseline run (docs/statistics.md#planning)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gym_metrics.rollouts import RolloutColumns
from gym_metrics.compare._inputs import task_rewards
from gym_metrics.compare._paired import compare_paired, task_components
from gym_metrics.errors import InvalidInputError, NotFoundError
from gym_metrics.statistics import ALPHA, POWER, PlanRow, plan

DEFAULT_REPEATS = (1, 2, 4, 8, 16, 32)
DEFAULT_CORRELATION = 0.5


@dataclass(frozen=True)
class Plan:
    """The table of designs, and the variance model it rests on."""

    agents: list[str]
    field: str
    mde: float
    alpha: float
    power: float
    between_difference: float
    """Variance of the true per-task differences between the two agents."""
    within_difference: float
    """within_a + within_b: the noise of one rollout each, divided by the repeats."""
    correlation: float | None
    """The assumed correlation of task difficulty between agents (one baseline agent only)."""
    baseline_tasks: int
    note: str
    rows: list[PlanRow]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


NO_SPREAD_VARIANCE = 1e-20
"""Variance below this (rewards are of order 1) is float rounding: the baseline has none."""


def plan_from_baseline(
    agents: Mapping[str, RolloutColumns],
    names: Sequence[str],
    mde: float,
    *,
    field: str = "reward",
    repeats: Sequence[int] = DEFAULT_REPEATS,
    alpha: float = ALPHA,
    power: float = POWER,
    correlation: float = DEFAULT_CORRELATION,
) -> Plan:
    """One baseline agent: the new agent is assumed to share its variance components, with task
    effects correlated `correlation` (between = 2 var_between (1 - rho), within = 2 var_within).
    Two agents (an earlier A/B run): their measured difference components."""
    if not mde > 0:
        raise InvalidInputError(f"--mde must be > 0, got {mde}")
    if not names:
        if len(agents) != 1:
            raise InvalidInputError(f"the baseline holds {len(agents)} agents ({', '.join(sorted(agents))}); name one with --agents")
        names = list(agents)
    for name in names:
        if name not in agents:
            raise NotFoundError(f"unknown agent {name!r}; baseline agents: {', '.join(sorted(agents)) or '(none)'}")
    if len(names) == 2:
        between, within, tasks, rho = _measured(agents, names, field, 1 - alpha)
    elif len(names) == 1:
        between, within, tasks, rho = _assumed(agents[names[0]], field, correlation)
    else:
        raise InvalidInputError(f"plan reads one baseline agent, or two; got {len(names)}")
    note = ""
    if not math.isfinite(within):
        note = "one rollout per task in the baseline: the within-task share is unknown, so all variance counts as between tasks (repeats do not help)"
        within = 0.0
    if between + within <= NO_SPREAD_VARIANCE:  # a saturated or deterministic baseline: every design looks like 2 tasks
        raise InvalidInputError(
            f"the baseline shows no spread in {field!r} (variance {between + within:.3g}: "
            + ("the two agents differ by the same amount on every task" if len(names) == 2 else "every task's rollouts score alike")
            + "): a plan needs the noise of real runs; give a baseline whose rewards vary"
        )
    rows = plan(between, within, mde, sorted(set(repeats)), alpha, power)
    return Plan(list(names), field, mde, alpha, power, between, within, rho, tasks, note, rows)


def _assumed(cols: RolloutColumns, field: str, rho: float) -> tuple[float, float, int, float | None]:
    if not -1 <= rho <= 1:
        raise InvalidInputError(f"--correlation must be in [-1, 1], got {rho}")
    _, rewards = task_rewards(cols, field)
    if len(rewards) < 2:
        raise InvalidInputError(f"the baseline has {len(rewards)} task(s) with a measured {field!r}; planning needs at least 2")
    vc = task_components(rewards)
    if not math.isfinite(vc.within):  # no repeats: the whole variance, uncorrelated (conservative)
        return 2 * vc.between, math.nan, vc.tasks, None
    return 2 * vc.between * (1 - rho), 2 * vc.within, vc.tasks, rho


def _measured(
    agents: Mapping[str, RolloutColumns], names: Sequence[str], field: str, confidence: float
) -> tuple[float, float, int, float | None]:
    report = compare_paired(agents, names, ("mean_reward",), (field,), confidence=confidence)
    c = report.comparisons[0]
    v = c.variance
    within = v["within_a"] + v["within_b"]
    if not math.isfinite(within):
        return c.sd_difference**2, math.nan, c.common_tasks, None
    return v["between_difference"], within, c.common_tasks, None
