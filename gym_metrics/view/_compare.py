"""Two runs side by side, task by task: each task's pass rate in both, which tasks flipped
(passing in one, failing in the other), and the paired difference of `gym-metrics compare`
(the analytic paired test over the common tasks, docs/statistics.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gym_metrics.compare import compare_paired
from gym_metrics.errors import GymMetricsError
from gym_metrics.reducers import passes
from gym_metrics.rollouts import NumericField, RolloutColumns
from gym_metrics.view._index import Indexed

MAX_TASK_ROWS = 2000
"""Tasks listed per comparison (flipped ones first); the counts cover them all."""


def _agent_columns(snap: Indexed, agent: str, zero_agents: np.ndarray | None) -> RolloutColumns:
    c = snap.columns
    if agent not in snap.agents:
        raise LookupError(f"no agent {agent!r} in this run; its agents: {', '.join(snap.agents) or '(none)'}")
    mine = c.agent == snap.agents.index(agent)
    reward = c.measured(zero_agents)[mine]  # masked and failed rows are out, as `compare` leaves them out (failed: 0 as the metrics counted them)
    present = ~np.isnan(reward)
    return RolloutColumns(c.task[mine], c.rollout[mine], {"reward": NumericField(np.where(present, reward, np.nan), present)}, np.zeros(int(mine.sum()), bool))


def _per_task(cols: RolloutColumns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tasks, measured rollouts, pass rate) of the rows with a reward."""
    field = cols.fields["reward"]
    tasks = cols.task_index[field.present]
    ids, inverse = np.unique(tasks, return_inverse=True)
    n = np.bincount(inverse, minlength=len(ids))
    passed = np.bincount(inverse, weights=passes(field.values[field.present]), minlength=len(ids))
    return ids, n, passed / np.maximum(n, 1)


def side_by_side(a: Indexed, agent_a: str, b: Indexed, agent_b: str, zero_a: np.ndarray | None = None, zero_b: np.ndarray | None = None) -> dict[str, Any]:
    """Per common task: pass rates in A and B and the flip (a task passes when more than half
    its rollouts do); the tasks only one run has; the paired difference of mean reward."""
    ca, cb = _agent_columns(a, agent_a, zero_a), _agent_columns(b, agent_b, zero_b)
    (ta, na, ra), (tb, nb, rb) = _per_task(ca), _per_task(cb)
    common, ia, ib = np.intersect1d(ta, tb, assume_unique=True, return_indices=True)
    pass_a, pass_b = ra[ia] > 0.5, rb[ib] > 0.5
    flip = np.where(pass_a & ~pass_b, "pass→fail", np.where(~pass_a & pass_b, "fail→pass", ""))
    order = np.lexsort((common, np.abs(ra[ia] - rb[ib]) * -1, flip == ""))  # flips first, biggest change first
    shown = order[:MAX_TASK_ROWS]
    rows = [{"task": int(common[i]), "rollouts_a": int(na[ia][i]), "rollouts_b": int(nb[ib][i]),
             "pass_rate_a": float(ra[ia][i]), "pass_rate_b": float(rb[ib][i]), "flip": str(flip[i])} for i in shown]  # fmt: skip
    out: dict[str, Any] = {
        "common_tasks": int(len(common)),
        "only_a": int(len(ta) - len(common)),
        "only_b": int(len(tb) - len(common)),
        "pass_to_fail": int((flip == "pass→fail").sum()),
        "fail_to_pass": int((flip == "fail→pass").sum()),
        "tasks": rows,
        "tasks_shown": len(rows),
    }
    try:
        report = compare_paired({"A": ca, "B": cb}, ["A", "B"], where=" of these two runs")
        c = report.comparisons[0]
        out["paired"] = {k: _plain(v) for k, v in (("metric", c.metric), ("value_a", c.value_a), ("value_b", c.value_b),
                         ("difference", c.difference), ("ci_low", c.ci_low), ("ci_high", c.ci_high), ("confidence", c.confidence),
                         ("p_value", c.stats.get("p_value")), ("common_tasks", c.common_tasks))}  # fmt: skip
    except GymMetricsError as exc:
        out["paired"] = {"error": str(exc)}
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(float(v)) else float(v)
    return v
