"""Is agent A better than agent B? The paired difference over the tasks both attempted.

Pairing matters: tasks differ far more in difficulty than agents do, so resampling tasks
independently per agent buries a consistent gap under task-to-task noise. Here one bootstrap
draws task indices once and uses them for both agents, so each resample compares the two agents
on the same tasks.

Rows used: unmasked, verified (no `_gm_error`) rows with a finite reward. Common tasks are those
where both agents have at least one such row; tasks only one agent has are reported, not used.

Metrics computed here, vectorised over resamples (SPEC B): `mean_reward` / `avg` (macro mean of
each task's mean), `pass_rate` (micro: passing samples / samples), `pass@k` and `pass^k`
(first k samples by rollout index; a sample passes at reward >= 1.0). Any other name is looked
up in the metric registry (`gym_metrics.reducers.get_reducer`) when it is installed and computed
on every resample in Python, which costs `resamples` calls of the metric.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gym_metrics.aggregate._columns import RolloutColumns
from gym_metrics.aggregate._reader import OnBadLine, RolloutFile, read_rollouts
from gym_metrics.errors import FieldViolation, GymMetricsError, InvalidInputError, NotFoundError

PASS_THRESHOLD = 1.0
CONFIDENCE = 0.95
NATIVE_METRICS = ("mean_reward", "avg", "pass_rate", "pass@k", "pass^k")
_FIRST_K = re.compile(r"^pass([@^])([1-9][0-9]*)$")
_MAX_DRAW = 4_000_000
"""Bootstrap indices drawn per chunk (resamples x tasks): bounds memory at ~50 MB. The cost is
about 1 ms per resample per 100k common tasks."""


@dataclass(frozen=True)
class Comparison:
    """A - B on the common tasks, with a paired-bootstrap percentile interval."""

    metric: str
    agent_a: str
    agent_b: str
    value_a: float
    """The metric of A over the common tasks."""
    value_b: float
    difference: float
    """value_a - value_b: the point estimate."""
    ci_low: float
    ci_high: float
    """Percentile interval of the bootstrap differences (2.5th and 97.5th for 95%)."""
    standard_error: float
    """Standard deviation of the bootstrap differences."""
    common_tasks: int
    only_a_tasks: tuple[int, ...]
    """Tasks with a measured reward for A only (not used)."""
    only_b_tasks: tuple[int, ...]
    resamples: int
    seed: int
    confidence: float = CONFIDENCE
    method: str = "paired bootstrap over common tasks (percentile interval)"

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["only_a_tasks"] = list(self.only_a_tasks)
        out["only_b_tasks"] = list(self.only_b_tasks)
        return out

    def summary(self) -> str:
        """A few lines for a terminal."""
        pct = f"{100 * self.confidence:g}%"
        lines = [
            (
                f"{self.metric}: {self.agent_a} - {self.agent_b} = {self.difference:+.4f}"
                f"  ({pct} CI [{self.ci_low:+.4f}, {self.ci_high:+.4f}], se {self.standard_error:.4f})"
            ),
            (
                f"  {self.agent_a}: {self.value_a:.4f}   {self.agent_b}: {self.value_b:.4f}"
                f"   over {self.common_tasks} common tasks"
            ),
            f"  paired bootstrap: {self.resamples} resamples of the common tasks, seed {self.seed}",
        ]
        for name, only in ((self.agent_a, self.only_a_tasks), (self.agent_b, self.only_b_tasks)):
            if only:
                shown = ", ".join(map(str, only[:10])) + (", ..." if len(only) > 10 else "")
                lines.append(f"  {len(only)} task(s) only {name} has (not used): {shown}")
        return "\n".join(lines)


@dataclass
class TaskRewards:
    """One agent's measured rewards grouped by task: task i's rewards, in rollout order, are
    values[starts[i]:starts[i + 1]]."""

    tasks: np.ndarray
    starts: np.ndarray
    values: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.starts)

    def take(self, positions: np.ndarray) -> TaskRewards:
        """The tasks at `positions`, in that order."""
        counts = self.counts[positions]
        starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        offsets = np.arange(int(starts[-1]), dtype=np.int64) - np.repeat(starts[:-1], counts)
        rows = np.repeat(self.starts[:-1][positions], counts) + offsets
        return TaskRewards(self.tasks[positions], starts, self.values[rows])

    def as_lists(self) -> list[list[float]]:
        return [chunk.tolist() for chunk in np.split(self.values, self.starts[1:-1])]


def task_rewards(cols: RolloutColumns, field: str = "reward") -> TaskRewards:
    """Measured rewards of one agent grouped by task (masked, failed and absent rows skipped)."""
    col = cols.fields.get(field)
    if col is None:
        return TaskRewards(np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0))
    keep = col.present & np.isfinite(col.values) & ~cols.masked
    if cols.errors is not None:
        keep &= cols.errors == 0
    t, r, v = cols.task_index[keep], cols.rollout_index[keep], col.values[keep]
    order = np.lexsort((r, t))
    t, r, v = t[order], r[order], v[order]
    dup = np.flatnonzero((t[1:] == t[:-1]) & (r[1:] == r[:-1]))
    if dup.size:
        key = f"{int(t[dup[0]])}:{int(r[dup[0]])}"
        raise InvalidInputError("duplicate rollout", [FieldViolation("rollout_id", f"{key} appears more than once")])
    first = np.flatnonzero(np.concatenate(([True], t[1:] != t[:-1]))) if len(t) else np.zeros(0, np.int64)
    return TaskRewards(t[first], np.append(first, len(t)).astype(np.int64), v)


def compare_agents(
    rollouts_or_path: str | Path | RolloutFile | Mapping[str, RolloutColumns],
    agent_a: str,
    agent_b: str,
    metric: str = "mean_reward",
    resamples: int = 10_000,
    seed: int = 0,
    *,
    field: str = "reward",
    on_bad_line: OnBadLine = "fail",
) -> Comparison:
    """metric(A) - metric(B) over the tasks both agents have, with a paired-bootstrap 95% interval."""
    if resamples < 1:
        raise GymMetricsError(f"resamples must be >= 1, got {resamples}")
    agents = _agents(rollouts_or_path, on_bad_line)
    where = f" in {rollouts_or_path}" if isinstance(rollouts_or_path, (str, Path)) else ""
    for name in (agent_a, agent_b):
        if name not in agents:
            raise NotFoundError(f"unknown agent {name!r}; agents{where}: {', '.join(sorted(agents)) or '(none)'}")
    a, b = task_rewards(agents[agent_a], field), task_rewards(agents[agent_b], field)
    common = np.intersect1d(a.tasks, b.tasks, assume_unique=True)
    if common.size < 2:
        raise InvalidInputError(
            f"agents {agent_a!r} and {agent_b!r} share {common.size} task(s) with a measured {field!r}; "
            "a paired comparison needs at least 2"
        )
    a_common = a.take(np.searchsorted(a.tasks, common))
    b_common = b.take(np.searchsorted(b.tasks, common))
    rng = np.random.default_rng(seed)
    reducer = _native(metric)
    if reducer is not None:
        (va, vb), diffs = _bootstrap_native(reducer, a_common, b_common, resamples, rng)
    else:
        (va, vb), diffs = _bootstrap_registry(metric, a_common, b_common, resamples, rng)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(diffs, [tail, 100 - tail])
    return Comparison(
        metric=metric,
        agent_a=agent_a,
        agent_b=agent_b,
        value_a=va,
        value_b=vb,
        difference=va - vb,
        ci_low=float(low),
        ci_high=float(high),
        standard_error=float(diffs.std(ddof=1)) if diffs.size > 1 else 0.0,
        common_tasks=int(common.size),
        only_a_tasks=tuple(np.setdiff1d(a.tasks, common, assume_unique=True).tolist()),
        only_b_tasks=tuple(np.setdiff1d(b.tasks, common, assume_unique=True).tolist()),
        resamples=resamples,
        seed=seed,
    )


def _agents(
    source: str | Path | RolloutFile | Mapping[str, RolloutColumns], on_bad_line: OnBadLine
) -> Mapping[str, RolloutColumns]:
    if isinstance(source, (str, Path)):
        return read_rollouts(source, on_bad_line=on_bad_line).agents
    if isinstance(source, RolloutFile):
        return source.agents
    return source


Reducer = Callable[["TaskRewards"], tuple[np.ndarray, np.ndarray]]
"""(numerator, weight) per task; the metric of a set of tasks is
sum(numerator) / sum(weight), so a resample is two gathers and two sums."""


def _native(metric: str) -> Reducer | None:
    if metric in ("mean_reward", "avg"):
        return lambda tr: (np.add.reduceat(tr.values, tr.starts[:-1]) / tr.counts, np.ones(len(tr.tasks)))
    if metric == "pass_rate":
        return lambda tr: (
            np.add.reduceat(tr.values >= PASS_THRESHOLD, tr.starts[:-1]).astype(float),
            tr.counts.astype(float),
        )
    m = _FIRST_K.match(metric)
    if m is None:
        return None
    k, every = int(m.group(2)), m.group(1) == "^"

    def first_k(tr: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
        position = np.arange(len(tr.values)) - np.repeat(tr.starts[:-1], tr.counts)
        passed = np.add.reduceat((tr.values >= PASS_THRESHOLD) & (position < k), tr.starts[:-1])
        hit = passed == np.minimum(tr.counts, k) if every else passed > 0
        return hit.astype(float), np.ones(len(tr.tasks))

    return first_k


def _bootstrap_native(
    reducer: Reducer, a: TaskRewards, b: TaskRewards, resamples: int, rng: np.random.Generator
) -> tuple[tuple[float, float], np.ndarray]:
    (na, wa), (nb, wb) = reducer(a), reducer(b)
    n = len(na)
    equal = bool((wa == wa[0]).all() and (wb == wb[0]).all())
    per_task = na / wa[0] - nb / wb[0]  # with equal weights a resample is one gather and one mean
    diffs = np.empty(resamples)
    step = max(1, _MAX_DRAW // n)
    for lo in range(0, resamples, step):
        idx = rng.integers(0, n, size=(min(step, resamples - lo), n), dtype=np.int32)
        if equal:
            diffs[lo : lo + len(idx)] = per_task[idx].mean(1)
        else:
            diffs[lo : lo + len(idx)] = na[idx].sum(1) / wa[idx].sum(1) - nb[idx].sum(1) / wb[idx].sum(1)
    return (float(na.sum() / wa.sum()), float(nb.sum() / wb.sum())), diffs


def _bootstrap_registry(
    metric: str, a: TaskRewards, b: TaskRewards, resamples: int, rng: np.random.Generator
) -> tuple[tuple[float, float], np.ndarray]:
    """Any registered metric: computed on each resample's task lists (Python per resample)."""
    try:
        from gym_metrics.reducers import get_reducer
    except ImportError:
        raise NotFoundError(
            f"metric {metric!r}: compare computes {', '.join(NATIVE_METRICS)} itself, and the metric "
            "registry (gym_metrics.reducers) is not installed for anything else"
        ) from None
    try:
        reducer = get_reducer(metric)
    except GymMetricsError:
        raise
    except (KeyError, ValueError, LookupError) as exc:
        raise NotFoundError(str(exc)) from None
    la, lb = a.as_lists(), b.as_lists()
    n = len(la)
    diffs = np.empty(resamples)
    for i in range(resamples):
        idx = rng.integers(0, n, size=n).tolist()
        diffs[i] = float(reducer.compute([la[j] for j in idx])) - float(reducer.compute([lb[j] for j in idx]))
    return (float(reducer.compute(la)), float(reducer.compute(lb))), diffs


__all__ = ["NATIVE_METRICS", "Comparison", "TaskRewards", "compare_agents", "task_rewards"]
