"""NeMo Gym's `nemo_gym.reward_profile` helpers for environments' `compute_metrics` / `get_key_metrics`.

The four names NeMo Gym 0.7.0's environments import from `nemo_gym.reward_profile`, with its
signatures, defaults, key names, key order and numbers (tests/nemo_gym/test_reward_profile.py
compares them with NeMo Gym's own output), computed over numpy arrays:

- `compute_pass_majority_metrics(tasks, score_fn=None, answer_key=None)` ->
  `(metrics, all_score_dicts, score_names, max_k)`: `pass@{k}/{name}`, `pass@1[avg-of-{k}]/{name}`,
  `majority@{k}/{name}` (with `answer_key`), `per_sample_aggregate`, and
  `pass@1[avg-of-{k}]/{name}/std_dev_across_runs` / `.../std_err_across_runs`. Percentages
  (0-100) except the spreads of per-run percentages, which are in points.
- `add_avg_sample_std_dev(metrics, all_score_dicts, score_names, max_k)`: adds
  `pass@1[avg-of-{k}]/{name}/avg_sample_std_dev` in place (raw score scale, not percent).
- `compute_subset_metrics(tasks, subset_key, score_fn=None, answer_key=None)`: the same per value
  of a rollout field, keys prefixed `{value}/`, `per_sample_aggregate` left out.
- `highest_k_metrics(agent_metrics, pattern, score_names=None, exclude_names=None)`: the entries
  of a `{k}` pattern at the highest k present.

And what environments' tests use of the rest: `AggregateMetricsMixin` (the three hooks and
their defaults), `compute_aggregate_metrics(verify_responses, compute_metrics_fn, ...)` (NeMo
Gym's AggregateMetrics, computed by gym-metrics' aggregation: the numbers collect writes) and
`RewardProfiler().rollout_info_from_result(row)` (a rollout's entry in its group's
`rollout_infos`). The rest of NeMo Gym's pandas RewardProfiler is not here: aggregation is
gym-metrics' engine.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from numpy.typing import NDArray

from gym_metrics.nemo_gym._reward_profile_stats import (
    across_run_spread,
    average_of_k,
    majority_of_k,
    pass_at_k,
    per_run_means,
    sample_spread,
)
from gym_metrics.nemo_gym._reward_profile_table import ScoreTable, answer_codes

__all__ = [
    "AggregateMetricsMixin",
    "RewardProfiler",
    "add_avg_sample_std_dev",
    "compute_aggregate_metrics",
    "compute_pass_majority_metrics",
    "compute_subset_metrics",
    "highest_k_metrics",
]

STD_DEV_ACROSS_RUNS = "std_dev_across_runs"
STD_ERR_ACROSS_RUNS = "std_err_across_runs"
AVG_SAMPLE_STD_DEV = "avg_sample_std_dev"
STAT_SUFFIXES = (STD_DEV_ACROSS_RUNS, STD_ERR_ACROSS_RUNS, AVG_SAMPLE_STD_DEV)

ScoreFn = Callable[[Dict[str, Any]], Mapping[str, Any]]


def _reward_as_accuracy(rollout: Dict[str, Any]) -> Dict[str, Any]:
    return {"accuracy": rollout["reward"]}


def _score_rollouts(
    tasks: List[List[Dict[str, Any]]], score_fn: ScoreFn, answer_key: Optional[str]
) -> Tuple[List[List[Dict[str, float]]], List[List[Optional[Hashable]]]]:
    """score_fn over every rollout (bools as 0/1; with answer_key, a `no_answer` score that is 1
    when the rollout's answer is missing or None), and the answers."""
    all_scores: List[List[Dict[str, float]]] = []
    all_answers: List[List[Optional[Hashable]]] = []
    for rollouts in tasks:
        task_scores: List[Dict[str, float]] = []
        task_answers: List[Optional[Hashable]] = []
        for rollout in rollouts:
            scores = {name: int(v) if isinstance(v, bool) else v for name, v in score_fn(rollout).items()}
            if answer_key is not None:
                answer = rollout.get(answer_key)
                task_answers.append(answer)
                scores["no_answer"] = int(answer is None)
            task_scores.append(scores)
        all_scores.append(task_scores)
        all_answers.append(task_answers)
    return all_scores, all_answers


def _nan_objects(table: ScoreTable, all_scores: List[List[Dict[str, float]]]) -> NDArray[np.int64]:
    """Per (task, rollout, name), 0, or for a NaN score a number naming its object. NeMo Gym's
    majority vote counts (answer, score) pairs with a Counter, where a NaN equals only the same
    object (Python hashes NaN by identity): NaNs read from JSON are one object and vote
    together, NaNs a score function makes one by one (`float("nan")`) vote apart."""
    objects = np.zeros(table.values.shape, dtype=np.int64)
    named: Dict[int, int] = {}
    for t, j, n in np.argwhere(table.present & np.isnan(table.values)).tolist():
        objects[t, j, n] = named.setdefault(id(all_scores[t][j][table.names[n]]), len(named) + 1)
    return objects


def compute_pass_majority_metrics(
    tasks: List[List[Dict[str, Any]]],
    score_fn: Optional[Any] = None,
    answer_key: Optional[str] = None,
) -> Tuple[Dict[str, Any], List[List[Dict[str, float]]], List[str], int]:
    """pass@k, pass@1[avg-of-k], majority@k (with `answer_key`) and their spread across runs,
    for k = 1 .. the longest task's rollout count; `tasks[i]` is task i's rollout dicts and
    `score_fn(rollout)` names the scores (default: `{"accuracy": rollout["reward"]}`)."""
    if not tasks:
        return {}, [], [], 0
    scorer: ScoreFn = _reward_as_accuracy if score_fn is None else score_fn
    all_scores, answers = _score_rollouts(tasks, scorer, answer_key)
    score_names = sorted({name for task in all_scores for scores in task for name in scores})
    max_k = max(len(rollouts) for rollouts in tasks)
    table = ScoreTable.build(all_scores, score_names)
    pass_sums, pass_counts = pass_at_k(table)
    avg_sums, avg_counts = average_of_k(table)
    majority = majority_of_k(table, answer_codes(answers, table.width), _nan_objects(table, all_scores)) if answer_key is not None else None
    metrics: Dict[str, Any] = {}
    for k in range(1, max_k + 1):
        for n, name in enumerate(score_names):
            if pass_counts[k - 1, n]:
                metrics[f"pass@{k}/{name}"] = 100.0 * float(pass_sums[k - 1, n]) / int(pass_counts[k - 1, n])
            if avg_counts[k - 1, n]:
                metrics[f"pass@1[avg-of-{k}]/{name}"] = 100.0 * float(avg_sums[k - 1, n]) / int(avg_counts[k - 1, n])
            if majority is not None:
                metrics[f"majority@{k}/{name}"] = 100.0 * float(majority[k - 1, n]) / len(tasks)
    run_means = per_run_means(table)
    metrics["per_sample_aggregate"] = run_means
    for k in range(2, max_k + 1):
        for name in score_names:
            spread = across_run_spread(run_means.get(name, []), k)
            if spread is not None:
                metrics[f"pass@1[avg-of-{k}]/{name}/{STD_DEV_ACROSS_RUNS}"] = spread[0]
                metrics[f"pass@1[avg-of-{k}]/{name}/{STD_ERR_ACROSS_RUNS}"] = spread[1]
    return metrics, all_scores, score_names, max_k


def add_avg_sample_std_dev(
    metrics: Dict[str, Any],
    all_score_dicts: List[List[Dict[str, float]]],
    score_names: list,
    max_k: int,
) -> None:
    """Add, in place, `pass@1[avg-of-{k}]/{name}/avg_sample_std_dev` for k = 2 .. max_k: the mean
    over tasks (with two or more values among their first k rollouts) of the sample std dev of
    those values, on the scores' own scale."""
    if max_k <= 1 or not all_score_dicts:
        return
    names = list(dict.fromkeys(score_names))
    table = ScoreTable.build(all_score_dicts, names, strict=False)
    if table.width == 0:
        return
    if table.invalid is not None:
        # NeMo Gym sums (and so fails on) only the values it reads: those among a task's first
        # max_k rollouts when it has two or more there. A None or text score elsewhere (a task
        # with one value, a rollout past max_k) is never read, and it returns numbers.
        counted = table.present[:, :max_k].sum(axis=1) >= 2
        read = table.invalid[:, :max_k] & counted[:, None, :]
        if read.any():
            task, rollout, n = (int(i[0]) for i in np.nonzero(read))
            bad = all_score_dicts[task][rollout][names[n]]
            raise TypeError(f"score {names[n]!r} has a value that is not a number: {bad!r}")
    for k in range(2, max_k + 1):
        sums, counts = sample_spread(table, k)
        for name in score_names:
            n = names.index(name)
            if counts[n]:
                metrics[f"pass@1[avg-of-{k}]/{name}/{AVG_SAMPLE_STD_DEV}"] = float(sums[n]) / int(counts[n])


def compute_subset_metrics(
    tasks: List[List[Dict[str, Any]]],
    subset_key: str,
    score_fn: Optional[Any] = None,
    answer_key: Optional[str] = None,
) -> Dict[str, Any]:
    """compute_pass_majority_metrics per value of `subset_key` (a task's value: the first truthy
    one among its rollouts; tasks without one are left out), keys prefixed `{value}/`, without
    `per_sample_aggregate`."""
    groups: Dict[Any, List[List[Dict[str, Any]]]] = {}
    for rollouts in tasks:
        value = next((r[subset_key] for r in rollouts if r.get(subset_key)), None)
        if value:
            groups.setdefault(value, []).append(rollouts)
    out: Dict[str, Any] = {}
    for value, group in groups.items():
        metrics = compute_pass_majority_metrics(group, score_fn=score_fn, answer_key=answer_key)[0]
        out.update((f"{value}/{key}", number) for key, number in metrics.items() if key != "per_sample_aggregate")
    return out


def highest_k_metrics(
    agent_metrics: Dict[str, Any],
    pattern: str,
    score_names: Optional[List[str]] = None,
    exclude_names: Optional[List[str]] = None,
) -> Dict[str, Any]:
    """The entries `{pattern with k}/{score name}` at the highest k present, e.g.
    `highest_k_metrics(m, "pass@{k}", score_names=["accuracy"])` -> `{"pass@32/accuracy": ...}`.
    Spread entries (names ending in std_dev_across_runs, std_err_across_runs,
    avg_sample_std_dev) are never returned; `exclude_names` applies after `score_names`."""
    matcher = re.compile("^" + re.escape(pattern).replace(r"\{k\}", r"(\d+)") + "/(.+)$")
    found: List[Tuple[int, str]] = []
    for key in agent_metrics:
        match = matcher.match(key)
        if match is None:
            continue
        k, name = int(match.group(1)), match.group(2)
        if name.endswith(STAT_SUFFIXES):
            continue
        if (score_names is not None and name not in score_names) or (exclude_names is not None and name in exclude_names):
            continue
        found.append((k, key))
    if not found:
        return {}
    top = max(k for k, _ in found)
    return {key: agent_metrics[key] for k, key in found if k == top}


class AggregateMetricsMixin:
    """The aggregation hooks with NeMo Gym's defaults: no custom metrics over all rollouts
    (`compute_metrics`) or per repeat (`compute_repeat_metrics`); the `mean/` entries as key
    metrics (`get_key_metrics`)."""

    def compute_metrics(self, tasks: List[List[Dict[str, Any]]]) -> Dict[str, Any]:
        return {}

    def compute_repeat_metrics(self, tasks: List[List[Dict[str, Any]]]) -> Dict[str, Any]:
        return {}

    def get_key_metrics(self, agent_metrics: Dict[str, Any]) -> Dict[str, Any]:
        return {k: v for k, v in agent_metrics.items() if k.startswith("mean/")}


def compute_aggregate_metrics(
    verify_responses: List[Dict[str, Any]],
    compute_metrics_fn: Optional[Callable[[List[List[Dict[str, Any]]]], Dict[str, Any]]] = None,
    get_key_metrics_fn: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None,
    compute_repeat_metrics_fn: Optional[Callable[[List[List[Dict[str, Any]]]], Dict[str, Any]]] = None,
) -> Any:
    """NeMo Gym's AggregateMetrics of `verify_responses` with these hooks (a mixin's default
    `compute_repeat_metrics` counts as none, as there)."""
    from gym_metrics.nemo_gym._aggregate_metrics import aggregate_answer

    if getattr(compute_repeat_metrics_fn, "__func__", None) is AggregateMetricsMixin.compute_repeat_metrics:
        compute_repeat_metrics_fn = None
    return aggregate_answer(verify_responses, compute_metrics_fn, get_key_metrics_fn, compute_repeat_metrics_fn)


def _numbers(source: Mapping[str, Any], into: Dict[str, Any], skip: Callable[[str], bool]) -> None:
    for key, value in source.items():
        if skip(key):
            continue
        if isinstance(value, bool):
            into[key] = int(value)
        elif isinstance(value, (int, float)):
            into[key] = value


class RewardProfiler:
    """What environments' tests call of NeMo Gym's RewardProfiler: a rollout's info entry."""

    def rollout_info_from_result(self, result: Dict[str, Any]) -> Dict[str, Any]:
        """`rollout_id` "task:rollout", the two indices, the reward when present, then every
        number of the response's usage and of the row's own fields (bools as 0/1; `_`-prefixed
        keys, `reward` and `response` left out), later keys winning."""
        task, rollout = result["_ng_task_index"], result["_ng_rollout_index"]  # KeyError without them, as there
        info: Dict[str, Any] = {"rollout_id": f"{task}:{rollout}", "_ng_task_index": task, "_ng_rollout_index": rollout}
        if "reward" in result:
            info["reward"] = result.get("reward")
        _numbers((result.get("response") or {}).get("usage") or {}, info, lambda key: False)
        _numbers(result, info, lambda key: key.startswith("_") or key in ("reward", "response"))
        return info
