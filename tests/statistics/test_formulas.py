"""gym_metrics.statistics beyond the reference vectors: the variance split on data with a known
answer, the clustered paired difference against its definition, verdict rules, planning, and a
fixed-seed simulation of the paired test's false-positive rate (issue 16, "Done when")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gym_metrics import statistics as st
from gym_metrics.aggregate import t_interval as aggregate_t_interval


def test_variance_components_of_a_hand_made_design() -> None:
    """Tasks means 0, 1, 2 (variance 1); each task's two rollouts are mean -/+ 0.5 (within 0.5)."""
    values = np.array([-0.5, 0.5, 0.5, 1.5, 1.5, 2.5])
    vc = st.variance_components(values, np.array([0, 0, 1, 1, 2, 2]))
    assert vc.within == pytest.approx(0.5) and vc.tasks == 3 and vc.rollouts == 6 and vc.repeats == 2
    assert vc.between == pytest.approx(1.0 - 0.5 / 2)
    assert vc.mean_variance(3, 2) == pytest.approx((0.75 + 0.25) / 3)


def test_variance_components_recover_a_simulated_split() -> None:
    rng = np.random.default_rng(0)
    tasks, k = 4000, 5
    values = np.repeat(rng.normal(0, 0.6, tasks), k) + rng.normal(0, 0.3, tasks * k)
    vc = st.variance_components(values, np.repeat(np.arange(tasks), k))
    assert vc.between == pytest.approx(0.36, rel=0.06) and vc.within == pytest.approx(0.09, rel=0.03)


def test_one_rollout_per_task_leaves_the_within_share_unknown() -> None:
    vc = st.variance_components(np.array([0.0, 1.0, 1.0]), np.arange(3))
    assert math.isnan(vc.within) and vc.between == pytest.approx(1 / 3)


def test_the_weighted_paired_difference_is_the_clustered_stderr_of_both_agents() -> None:
    """Means over rollouts (task sums over counts): the difference's se is the cluster-robust
    one, sqrt(G/(G-1) sum_g u_g^2), with u_g from both agents' rollouts of task g."""
    rng = np.random.default_rng(3)
    ka, kb = rng.integers(1, 5, 30), rng.integers(1, 4, 30)
    xa, xb = rng.uniform(0, 1, ka.sum()), rng.uniform(0, 1, kb.sum())
    ga, gb = np.repeat(np.arange(30), ka), np.repeat(np.arange(30), kb)
    sa, sb = np.bincount(ga, xa), np.bincount(gb, xb)
    res = st.paired_difference(sa, sb, ka, kb)
    u = np.bincount(ga, xa - xa.mean()) / len(xa) - np.bincount(gb, xb - xb.mean()) / len(xb)
    assert res.difference == pytest.approx(xa.mean() - xb.mean())
    assert res.standard_error == pytest.approx(math.sqrt(30 / 29 * (u @ u)), rel=1e-12)
    # One agent against nothing (b all zero): the clustered stderr of a's mean over rollouts.
    alone = st.paired_difference(sa, np.zeros(30), ka, kb)
    assert alone.standard_error == pytest.approx(st.cluster_stderr(xa, ga), rel=1e-12)


def test_identical_agents_and_constant_gaps() -> None:
    a = np.array([0.2, 0.5, 0.9])
    """No spread, no test: scipy's ttest_rel gives NaN (identical) or t = inf, p = 0 (a constant
    gap); neither is a finding. p, t and the interval are NaN (a constant gap made of floats,
    a + 0.1 - a, has a rounding spread of 1e-17: the same)."""
    same = st.paired_difference(a, a)
    assert (same.difference, same.standard_error) == (0.0, 0.0)
    assert all(math.isnan(x) for x in (same.p_value, same.t_statistic, same.ci_low, same.ci_high))
    gap = st.paired_difference(a + 0.1, a)
    assert gap.difference == pytest.approx(0.1) and gap.standard_error == 0.0
    assert all(math.isnan(x) for x in (gap.p_value, gap.ci_low, gap.ci_high))
    with pytest.raises(ValueError, match="at least 2 tasks"):
        st.paired_difference(a[:1], a[:1])


def test_the_t_quantile_is_the_aggregate_engines() -> None:
    for n in (2, 3, 10, 57, 3000):
        low, high = st.t_interval(0.5, 0.1, n - 1)
        assert (low, high) == aggregate_t_interval(0.5, 0.1, n)


def test_plan_needs_fewer_tasks_with_more_repeats_and_matches_the_power_function() -> None:
    rows = st.plan(between=0.02, within=0.4, mde=0.05, repeats=[1, 2, 4, 8])
    tasks = [r.tasks for r in rows]
    assert tasks == sorted(tasks, reverse=True) and all(t is not None for t in tasks)
    for r in rows:
        assert r.tasks is not None and r.rollouts_per_agent == r.tasks * r.repeats
        es = 0.05 / r.sd_difference
        assert st.ttest_power(es, r.tasks) >= 0.8 > st.ttest_power(es, r.tasks - 1)
    # The MDE at the planned size is at most the target.
    assert st.minimum_detectable_effect(rows[0].tasks or 0, rows[0].sd_difference) <= 0.05


def _suite(rng: np.random.Generator, binary: bool) -> tuple[np.ndarray, np.ndarray]:
    """100 tasks x 4 repeats for two agents of equal skill, intra-task correlation 0.3."""
    tasks, k, icc = 100, 4, 0.3
    if binary:
        # latent normal with task effect: corr of the latent is icc
        effect = rng.normal(0, math.sqrt(icc), tasks)[:, None]
        a = (effect + rng.normal(0, math.sqrt(1 - icc), (tasks, k)) > 0).astype(float)
        b = (effect + rng.normal(0, math.sqrt(1 - icc), (tasks, k)) > 0).astype(float)
    else:
        effect = rng.normal(0, math.sqrt(icc), tasks)[:, None]
        a = effect + rng.normal(0, math.sqrt(1 - icc), (tasks, k))
        b = effect + rng.normal(0, math.sqrt(1 - icc), (tasks, k))
    return a.sum(1), b.sum(1)


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "continuous"])
def test_the_paired_test_rejects_a_true_null_at_its_level(binary: bool) -> None:
    rng = np.random.default_rng(16)
    weights = np.full(100, 4.0)
    rejected = sum(st.paired_difference(*_suite(rng, binary), weights, weights).p_value < 0.05 for _ in range(2000))
    assert 0.035 <= rejected / 2000 <= 0.065


def test_the_effect_size_at_alpha_edges() -> None:
    """alpha >= power: a test at that alpha rejects a null effect at least `power` of the time,
    so the detectable effect is 0 (brentq was handed a bracket without a sign change: an
    internal error); an alpha of 1e-16 made the starting guess's 1 - alpha/2 round to 1.0."""
    assert st.effect_size_for_power(30, 0.9, 0.8) == 0.0
    assert st.effect_size_for_power(30, 0.6, 0.5) == 0.0
    tiny = st.effect_size_for_power(30, 1e-16, 0.8)
    assert math.isfinite(tiny) and tiny > 0 and st.ttest_power(tiny, 30, 1e-16) == pytest.approx(0.8, abs=1e-9)


def test_a_verdicts_reason_tells_the_bound_from_the_margin() -> None:
    """-0.04997 read -0.0500 at 4 decimals: "the interval [-0.0500, ...] lies above -0.05"."""
    from gym_metrics.compare import fail_if_worse_by

    check = fail_if_worse_by(0.05, -0.04997, 0.5666, "m(reward): a - b")
    assert check.status == "PASS" and "[-0.04997, +0.56660] lies above -0.05" in check.reason
    assert "[+0.1000, +0.2000]" in fail_if_worse_by(0.05, 0.1, 0.2, "x").reason
