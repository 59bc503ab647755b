"""Uncertainty of a mean over rollouts that share tasks: clustered standard errors and the
split of the variance into a between-task and a within-task part.

Rollouts of one task are not independent (an easy task is easy for every repeat), so the
textbook s / sqrt(N) over rollouts is too small. The clustered (cluster-robust) standard error
treats each task as one independent unit (Miller 2024, "Adding Error Bars to Evals", appendix A;
inspect-ai's `stderr(cluster=...)`, with the same finite-cluster factor G / (G - 1)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gym_metrics.statistics._tdist import t_quantile

CONFIDENCE = 0.95


def group_codes(clusters: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense codes 0..G-1 for any cluster ids (ints or strings), and G."""
    ids = np.asarray(clusters)
    if ids.ndim != 1:
        raise ValueError("clusters must be one-dimensional")
    _, codes = np.unique(ids, return_inverse=True)
    codes = codes.reshape(-1)
    return codes, int(codes.max()) + 1 if len(codes) else 0


def linearized_stderr(numerators: np.ndarray, weights: np.ndarray) -> float:
    """Clustered standard error of the ratio sum(numerators) / sum(weights), one entry per cluster.

    With R the ratio, W the total weight and G clusters, each cluster contributes
    u_g = (numerator_g - R * weight_g) / W, and se = sqrt(G / (G - 1) * sum_g u_g^2).
    For a mean over rollouts (numerator = the task's sum, weight = its rollout count) this is
    exactly the clustered standard error; for a mean of per-task values (weight 1) it is the
    ordinary s / sqrt(G). NaN with fewer than two clusters or a zero total weight.
    """
    g = len(numerators)
    total = float(weights.sum())
    if g < 2 or total <= 0:
        return math.nan
    ratio = float(numerators.sum()) / total
    u = (numerators - ratio * weights) / total
    # np.square().sum(), not np.dot: BLAS picks its summation order by CPU (and OPENBLAS_CORETYPE),
    # so a dot product makes the output differ in the last bit from machine to machine.
    return math.sqrt(g / (g - 1) * float(np.square(u).sum()))


def cluster_stderr(values: np.ndarray, clusters: np.ndarray) -> float:
    """Standard error of mean(values) when values sharing a cluster id are correlated.

    se = sqrt(G / (G - 1) * sum_g (sum_{j in g} (x_j - mean))^2) / N over G clusters and N
    values; it equals s / sqrt(N) when every cluster holds one value. NaN for G < 2.
    """
    x = np.asarray(values, dtype=np.float64)
    codes, g = group_codes(clusters)
    if len(codes) != len(x):
        raise ValueError(f"values and clusters differ in length ({len(x)} vs {len(codes)})")
    sums = np.bincount(codes, weights=x, minlength=g)
    counts = np.bincount(codes, minlength=g).astype(np.float64)
    return linearized_stderr(sums, counts)


def t_interval(estimate: float, stderr: float, df: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """estimate -/+ t_{(1 + confidence) / 2, df} * stderr (NaN bounds when df < 1 or se is NaN)."""
    if df < 1 or not math.isfinite(stderr):
        return math.nan, math.nan
    half = t_quantile(df, 0.5 + confidence / 2) * stderr
    return estimate - half, estimate + half


@dataclass(frozen=True)
class VarianceComponents:
    """One-way random-effects split of the variance of rollout values grouped by task.

    A rollout value is x_ij = mu + task effect_i + noise_ij. `between` estimates Var(task
    effect), how much tasks differ; `within` estimates Var(noise), how much repeats of one task
    differ. The variance of an agent's mean over n tasks with k repeats each is about
    (between + within / k) / n: more repeats only shrink the second term, more tasks shrink both.
    """

    between: float
    """max(0, variance of the task means (ddof 1) - within * mean(1 / k_i)); NaN with < 2 tasks."""
    within: float
    """Pooled variance within tasks: sum_i sum_j (x_ij - m_i)^2 / sum_i (k_i - 1); NaN when no
    task has two rollouts."""
    tasks: int
    rollouts: int
    mean_inverse_repeats: float
    """mean over tasks of 1 / k_i (1 / k when every task has k rollouts)."""

    @property
    def repeats(self) -> float:
        """The harmonic mean of rollouts per task."""
        return 1.0 / self.mean_inverse_repeats if self.mean_inverse_repeats > 0 else math.nan

    def mean_variance(self, tasks: int, repeats: float) -> float:
        """(between + within / repeats) / tasks: the variance of a mean for that design."""
        return (self.between + self.within / repeats) / tasks


def variance_components(values: np.ndarray, clusters: np.ndarray) -> VarianceComponents:
    """Between-task and within-task variance of `values` grouped by `clusters` (method of moments)."""
    x = np.asarray(values, dtype=np.float64)
    codes, g = group_codes(clusters)
    if len(codes) != len(x):
        raise ValueError(f"values and clusters differ in length ({len(x)} vs {len(codes)})")
    counts = np.bincount(codes, minlength=g).astype(np.float64)
    means = np.bincount(codes, weights=x, minlength=g) / np.maximum(counts, 1)
    return components_from_groups(means, counts, float(((x - means[codes]) ** 2).sum()))


def components_from_groups(means: np.ndarray, counts: np.ndarray, within_ss: float) -> VarianceComponents:
    """VarianceComponents from per-task means and rollout counts and the pooled within-task sum
    of squares (for callers that already hold grouped sums)."""
    g = len(means)
    dof = float(counts.sum()) - g
    within = within_ss / dof if dof > 0 else math.nan
    inverse = float((1.0 / counts).mean()) if g else math.nan
    if g < 2:
        between = math.nan
    else:
        spread = float(means.var(ddof=1))
        between = max(0.0, spread - (within if math.isfinite(within) else 0.0) * inverse)
    return VarianceComponents(between, within, g, int(counts.sum()), inverse)
