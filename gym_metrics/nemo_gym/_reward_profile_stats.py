"""pass@k, pass@1[avg-of-k], majority@k and their spreads over a ScoreTable, for every k at once.

Each function returns numbers as arrays indexed [k - 1, score name] (NaN-free bookkeeping: a
`counts` array says how many tasks entered each number, 0 meaning NeMo Gym emits no key), and
`reward_profile` lays them out under NeMo Gym's key names and in its key order.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from gym_metrics.nemo_gym._reward_profile_sums import neumaier_prefix, python_sum, total
from gym_metrics.nemo_gym._reward_profile_table import ScoreTable

__all__ = ["across_run_spread", "average_of_k", "majority_of_k", "pass_at_k", "per_run_means", "sample_spread"]

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]
NAN_BITS = np.array(np.nan).view(np.int64)


@lru_cache(maxsize=65536)
def _unbiased_pass(n_total: int, n_wrong: int, k: int) -> float:
    """1 - C(wrong, k) / C(total, k): the chance that k of the rollouts drawn include a right one."""
    if n_wrong < k:
        return 1.0
    return 1.0 - math.comb(n_wrong, k) / math.comb(n_total, k)


def _first_k_maxima(values: Floats, present: NDArray[np.bool_]) -> Floats:
    """out[t, j]: Python's `max` of task t's first j + 1 present values (a NaN counts only when
    it comes first: `max` keeps its first item unless a later one compares greater)."""
    order = np.argsort(~present, axis=1, kind="stable")
    packed = np.take_along_axis(values, order, axis=1)
    maxima = np.fmax.accumulate(packed, axis=1)
    maxima[np.isnan(packed[:, 0])] = np.nan
    return maxima


def pass_at_k(table: ScoreTable) -> tuple[Floats, Ints]:
    """Per k and name, the sum over tasks of pass@k and how many tasks entered it. A task enters
    when it has at least k values of the score; all-0/1 tasks use the unbiased estimator over all
    their values, other tasks the best of their first k values."""
    width, names = table.width, len(table.names)
    sums, counts = np.zeros((width, names)), np.zeros((width, names), dtype=np.int64)
    for n in range(names):
        values, present = table.values[:, :, n], table.present[:, :, n]
        have = present.sum(axis=1)
        binary = np.all(~present | (values == 0) | (values == 1), axis=1)
        wrong = (present & (values == 0)).sum(axis=1)
        maxima = _first_k_maxima(values, present)
        for k in range(1, width + 1):
            enter = have >= k
            if not enter.any():
                continue
            picked = maxima[enter, k - 1]
            exact = binary[enter]
            pairs = zip(have[enter][exact].tolist(), wrong[enter][exact].tolist())
            picked[exact] = [_unbiased_pass(a, b, k) for a, b in pairs]
            sums[k - 1, n], counts[k - 1, n] = total(picked), picked.size
    return sums, counts


def average_of_k(table: ScoreTable) -> tuple[Floats, Ints]:
    """Per k and name, the sum over tasks of the mean of the score over the task's first k
    rollouts (those that have it), and how many tasks have it among their first k."""
    prefix = neumaier_prefix(np.where(table.present, table.values, 0.0))
    seen = np.cumsum(table.present, axis=1)
    sums, counts = np.zeros((table.width, len(table.names))), np.zeros((table.width, len(table.names)), dtype=np.int64)
    for k in range(1, table.width + 1):
        for n in range(len(table.names)):
            enter = seen[:, k - 1, n] > 0
            means = prefix[enter, k - 1, n] / seen[enter, k - 1, n]
            sums[k - 1, n], counts[k - 1, n] = total(means), int(enter.sum())
    return sums, counts


def _pair_ids(codes: Ints, scores: Floats, voters: NDArray[np.bool_], nans: Ints) -> tuple[Ints, Floats]:
    """Id of each voting rollout's (task, answer, score) triple (score compared as Python
    compares it: -0.0 == 0.0, and a NaN equal only to itself, `nans` telling the objects
    apart), and each id's score."""
    canonical = scores + 0.0
    bits = canonical.view(np.int64).copy()
    bits[np.isnan(canonical)] = NAN_BITS
    tasks = np.broadcast_to(np.arange(codes.shape[0])[:, None], codes.shape)
    keys = np.stack([tasks[voters], codes[voters], bits[voters], nans[voters]], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    ids = np.full(codes.shape, -1, dtype=np.int64)
    ids[voters] = inverse.reshape(-1)
    return ids, canonical[voters][first]


class _CompensatedSums:
    """Per-task running sums of the tied pairs' scores, compensated as Python's `sum` is."""

    def __init__(self, tasks: int) -> None:
        self.partial, self.carry = np.zeros(tasks), np.zeros(tasks)
        self.count = np.zeros(tasks, dtype=np.int64)

    def restart(self, rows: Ints, values: Floats) -> None:
        self.partial[rows], self.carry[rows], self.count[rows] = values + 0.0, 0.0, 1

    def add(self, rows: Ints, values: Floats) -> None:
        before = self.partial[rows]
        with np.errstate(invalid="ignore", over="ignore"):
            after = before + values
            error = np.where(np.abs(before) >= np.abs(values), (before - after) + values, (values - after) + before)
        self.partial[rows], self.carry[rows] = after, self.carry[rows] + error
        self.count[rows] += 1

    def means(self) -> Floats:
        """sum / count per task (0.0 for a task with nothing counted)."""
        carry_ok = (self.carry != 0) & np.isfinite(self.carry)
        with np.errstate(invalid="ignore", over="ignore"):
            sums = np.where(carry_ok, self.partial + self.carry, self.partial)
        return np.divide(sums, self.count, out=np.zeros(self.count.size), where=self.count > 0)


def majority_of_k(table: ScoreTable, codes: Ints, nans: Ints) -> Floats:
    """Per k and name, the sum over all tasks of majority@k: the mean score of the most frequent
    (answer, score) pairs among the first k rollouts with an answer and the score (0 if none).
    `nans[t, j, n]` tells NaN score objects apart (0 for other scores). Counts grow by one
    rollout per step, so the tied set is kept, not recounted."""
    tasks, width = codes.shape
    sums = np.zeros((width, len(table.names)))
    for n in range(len(table.names)):
        voters = (codes >= 0) & table.present[:, :, n]
        if not voters.any():
            continue
        ids, pair_scores = _pair_ids(codes, table.values[:, :, n], voters, nans[:, :, n])
        votes = np.zeros(pair_scores.size, dtype=np.int64)
        best = np.zeros(tasks, dtype=np.int64)
        tied = _CompensatedSums(tasks)
        for j in range(width):
            rows = np.flatnonzero(voters[:, j])
            pair = ids[rows, j]
            votes[pair] += 1
            now = votes[pair]
            lead, tie = now > best[rows], now == best[rows]
            best[rows[lead]] = now[lead]
            tied.restart(rows[lead], pair_scores[pair[lead]])
            tied.add(rows[tie], pair_scores[pair[tie]])
            sums[j, n] = total(tied.means())
    return sums


def per_run_means(table: ScoreTable) -> dict[str, list[float]]:
    """name -> pass@1 (percent) of rollout position j over the tasks that have it, for the
    positions some task has it at (positions where none has it are skipped, not zero)."""
    out: dict[str, list[float]] = {}
    for n, name in enumerate(table.names):
        means = []
        for j in range(table.width):
            column = table.values[table.present[:, j, n], j, n]
            if column.size:
                means.append(100.0 * total(column) / column.size)
        if means:
            out[name] = means
    return out


def across_run_spread(run_means: list[float], k: int) -> tuple[float, float] | None:
    """Sample std dev and std err of the first k per-run means, None with fewer than two."""
    head = run_means[:k]
    if len(head) < 2:
        return None
    mean = python_sum(head) / len(head)
    std = math.sqrt(python_sum([(x - mean) ** 2 for x in head]) / (len(head) - 1))
    return std, std / math.sqrt(len(head))


def sample_spread(table: ScoreTable, k: int) -> tuple[Floats, Ints]:
    """Per name, the sum over tasks of the sample std dev of the task's first k values of the
    score (raw scale) and how many tasks have at least two of them."""
    head_values = np.where(table.present[:, :k], table.values[:, :k], 0.0)
    seen = table.present[:, :k].sum(axis=1)
    with np.errstate(invalid="ignore", over="ignore"):
        means = neumaier_prefix(head_values)[:, -1] / np.maximum(seen, 1)
        squares = np.where(table.present[:, :k], (table.values[:, :k] - means[:, None, :]) ** 2, 0.0)
        spread = np.sqrt(neumaier_prefix(squares)[:, -1] / np.maximum(seen - 1, 1))
    sums = np.zeros(len(table.names))
    for n in range(len(table.names)):
        enter = seen[:, n] >= 2
        sums[n] = total(spread[enter, n])
    return sums, (seen >= 2).sum(axis=0)
