"""Is agent A better than agent B? The paired difference over the tasks both attempted.

Pairing matters: tasks differ far more in difficulty than agents do, so resampling tasks
independently per agent buries a consistent gap under task-to-task noise. Here one bootstrap
draws task indices once and uses them for both agents, so each resample compares the two agents
on the same tasks.

Rows used: unmasked, verified (no `_gm_error`) rows with a finite reward. Common tasks are those
where both agents have at least one such row; tasks only one agent has are reported, not used.

Any reward reducer can be compared (`gym_metrics.reducers`: mean_reward / avg, pass_rate,
pass@k, pass^k, unbiased_pass@k, unbiased_pass^k, or a registered plugin), with the reducers'
own definitions. One with a per-task form (`Reducer.task_terms`: every built-in and every
MeanOverTasks) is resampled in numpy, all resamples at once; any other is recomputed on each
resample in Python, which costs `resamples` calls of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gym_metrics.rollouts import OnBadLine, RolloutColumns, RolloutFile, read_rollouts
from gym_metrics.compare._inputs import task_rewards
from gym_metrics.compare._method import CompareMethod, CompareOptions, register_method
from gym_metrics.compare._result import BOOTSTRAP, CONFIDENCE, Comparison, ComparisonReport
from gym_metrics.errors import GymMetricsError, InvalidInputError, NotFoundError
from gym_metrics.reducers import Reducer, TaskRewards, get_reducer

_MAX_DRAW = 4_000_000
"""Bootstrap indices drawn per chunk (resamples x tasks): bounds memory at ~50 MB. The cost is
about 1 ms per resample per 100k common tasks."""


LAYOUT = (
    "metric", "agent_a", "agent_b", "value_a", "value_b", "difference", "ci_low", "ci_high", "standard_error",
    "common_tasks", "only_a_tasks", "only_b_tasks", "resamples", "seed", "confidence", "method",
)  # fmt: skip
"""The JSON keys of a bootstrap comparison, in order. The interval is the 2.5th and 97.5th
percentile of the bootstrap differences, the standard error their standard deviation; its own
numbers (`Comparison.stats`) are resamples and seed."""


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
    (tasks_a, a), (tasks_b, b) = task_rewards(agents[agent_a], field), task_rewards(agents[agent_b], field)
    common = np.intersect1d(tasks_a, tasks_b, assume_unique=True)
    if common.size < 2:
        raise InvalidInputError(
            f"agents {agent_a!r} and {agent_b!r} share {common.size} task(s) with a measured {field!r}; "
            "a paired comparison needs at least 2"
        )
    a_common = a.take(np.searchsorted(tasks_a, common))
    b_common = b.take(np.searchsorted(tasks_b, common))
    rng = np.random.default_rng(seed)
    reducer = get_reducer(metric)
    terms_a, terms_b = reducer.task_terms(a_common), reducer.task_terms(b_common)
    used, notes = int(common.size), []
    if terms_a is not None and terms_b is not None:
        (na, wa), (nb, wb) = terms_a, terms_b
        keep = (wa > 0) & (wb > 0)  # the tasks the reducer counts for both (unbiased_pass@k: k rollouts each), as the paired method
        used = int(keep.sum())
        if used < 2:
            raise InvalidInputError(f"{metric!r} counts fewer than 2 of the common tasks of {agent_a!r} and {agent_b!r}")
        if used < common.size:
            notes.append(f"  {common.size - used} common task(s) {metric} does not count for both agents: not used")
        na, wa, nb, wb = na[keep], wa[keep], nb[keep], wb[keep]
        va, vb = float(na.sum() / wa.sum()), float(nb.sum() / wb.sum())
        diffs = _paired_terms((na, wa), (nb, wb), resamples, rng)
    else:
        va, vb = float(reducer.compute(a_common)), float(reducer.compute(b_common))
        diffs = _paired_recompute(reducer, a_common, b_common, resamples, rng)
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
        common_tasks=used,
        only_a_tasks=tuple(np.setdiff1d(tasks_a, common, assume_unique=True).tolist()),
        only_b_tasks=tuple(np.setdiff1d(tasks_b, common, assume_unique=True).tolist()),
        field=field,
        confidence=CONFIDENCE,
        method=BOOTSTRAP,
        stats={"resamples": resamples, "seed": seed, "differences": tuple(diffs.tolist())},  # for a gate's Bonferroni interval, not written
        layout=LAYOUT,
        notes=(f"  paired bootstrap: {resamples} resamples of the common tasks, seed {seed}", *notes),
    )


def _agents(
    source: str | Path | RolloutFile | Mapping[str, RolloutColumns], on_bad_line: OnBadLine
) -> Mapping[str, RolloutColumns]:
    if isinstance(source, (str, Path)):
        return read_rollouts(source, on_bad_line=on_bad_line).agents
    if isinstance(source, RolloutFile):
        return source.agents
    return source


Terms = tuple[np.ndarray, np.ndarray]
"""A reducer's (numerator, weight) per task (`Reducer.task_terms`)."""


def _paired_terms(a: Terms, b: Terms, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """The bootstrap differences from per-task terms: a resample is two gathers and two sums
    per agent (one gather and a mean when every task weighs the same)."""
    (na, wa), (nb, wb) = a, b
    n = len(na)
    equal = bool((wa == wa[0]).all() and (wb == wb[0]).all() and wa[0] > 0 and wb[0] > 0)
    per_task = na / wa[0] - nb / wb[0] if equal else None
    diffs = np.empty(resamples)
    step = max(1, _MAX_DRAW // n)
    for lo in range(0, resamples, step):
        idx = rng.integers(0, n, size=(min(step, resamples - lo), n), dtype=np.int32)
        if per_task is not None:
            diffs[lo : lo + len(idx)] = per_task[idx].mean(1)
        else:
            diffs[lo : lo + len(idx)] = _ratio(na[idx].sum(1), wa[idx].sum(1)) - _ratio(nb[idx].sum(1), wb[idx].sum(1))
    return diffs


def _ratio(numerator: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """numerator / weight, 0.0 where the weight is 0 (a resample with no task that counts)."""
    ratio: np.ndarray = np.divide(numerator, weight, out=np.zeros(len(weight)), where=weight > 0)
    return ratio


def _paired_recompute(
    reducer: Reducer, a: TaskRewards, b: TaskRewards, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """A reducer without per-task terms: recomputed on each resample's tasks (Python per resample)."""
    n = len(a)
    diffs = np.empty(resamples)
    for i in range(resamples):
        idx = rng.integers(0, n, size=n)
        diffs[i] = float(reducer.compute(a.take(idx))) - float(reducer.compute(b.take(idx)))
    return diffs


@register_method("bootstrap")
class BootstrapMethod(CompareMethod):
    """`compare_agents` behind `--method bootstrap`: two agents, one reducer, one field."""

    def run(self, agents: Mapping[str, RolloutColumns], names: Sequence[str], options: CompareOptions) -> ComparisonReport:
        if len(names) != 2 or len(options.reducers) != 1 or len(options.fields) != 1:
            raise InvalidInputError("--method bootstrap compares two agents on one --reducer and one --field")
        c = compare_agents(
            agents, names[0], names[1], metric=options.reducers[0], resamples=options.resamples, seed=options.seed,
            field=options.fields[0],
        )  # fmt: skip
        return ComparisonReport([c], "", c.confidence, 1 - c.confidence, options.power, BOOTSTRAP, "bootstrap")

    def lines(self, report: ComparisonReport, c: Comparison) -> list[str]:
        return c.summary().split("\n")

    def describe(self, report: ComparisonReport) -> str:
        return f"paired bootstrap over common tasks ({report.comparisons[0].resamples} resamples, percentile interval)"

    def to_json(self, report: ComparisonReport, verdict: dict[str, Any] | None) -> dict[str, Any]:
        """The one comparison's fields, and its verdict when there is one."""
        return {**report.comparisons[0].to_dict(), **({"verdict": verdict} if verdict else {})}

    def verdict_interval(self, c: Comparison, confidence: float, m: int) -> tuple[float, float]:
        """The percentile interval at `confidence` (1 - alpha / m over m checks), from the
        resampled differences (the report's own interval when m is 1)."""
        if m == 1:
            return c.ci_low, c.ci_high
        tail = 100 * (1 - confidence) / 2
        low, high = np.percentile(c.differences, [tail, 100 - tail])
        return float(low), float(high)
