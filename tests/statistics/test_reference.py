"""gym_metrics.statistics against independent implementations: the vectors in
tests/data/statistics/reference.json, made by scripts/make_statistics_reference.py with
inspect-ai, statsmodels and scipy in a throwaway environment (versions stored in the file)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gym_metrics import statistics as st

REFERENCE: dict[str, Any] = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "statistics" / "reference.json").read_text()
)
EXACT = 1e-9
"""Relative tolerance where the reference is a closed form."""
SOLVED = 1e-5
"""Relative tolerance where the reference solves an equation numerically: statsmodels' solver
stops early (its n=200 effect size has power 0.8000019; ours has 0.8 to 1e-15), so the roots are
checked to its precision and ours by its power, to 1e-12."""


def test_the_vectors_record_their_versions() -> None:
    assert set(REFERENCE["versions"]) == {"inspect-ai", "statsmodels", "scipy", "numpy"}


@pytest.mark.parametrize("case", REFERENCE["clustered_stderr"], ids=lambda c: f"{len(c['values'])}values")
def test_cluster_stderr_is_inspect_ais(case: dict[str, Any]) -> None:
    values, clusters = np.array(case["values"]), np.array(case["clusters"])
    assert st.cluster_stderr(values, clusters) == pytest.approx(case["cluster_stderr"], rel=EXACT)
    assert st.cluster_stderr(values, np.arange(len(values))) == pytest.approx(case["stderr"], rel=EXACT)


def test_cluster_stderr_accepts_string_ids_and_refuses_mismatched_lengths() -> None:
    case = REFERENCE["clustered_stderr"][1]
    names = np.array([f"task-{c}" for c in case["clusters"]])
    assert st.cluster_stderr(np.array(case["values"]), names) == pytest.approx(case["cluster_stderr"], rel=EXACT)
    with pytest.raises(ValueError, match="differ in length"):
        st.cluster_stderr(np.ones(3), np.arange(2))
    assert math.isnan(st.cluster_stderr(np.ones(3), np.zeros(3)))  # one cluster: undefined


@pytest.mark.parametrize("case", REFERENCE["bootstrap_stderr"], ids=lambda c: f"{len(c['values'])}values")
def test_inspect_ais_bootstrap_stderr_agrees_with_the_analytic_one(case: dict[str, Any]) -> None:
    """Random by construction: within 10% of the analytic value (5000 resamples)."""
    values = np.array(case["values"])
    analytic = st.cluster_stderr(values, np.arange(len(values)))
    assert case["bootstrap_stderr"] == pytest.approx(analytic, rel=0.1)


@pytest.mark.parametrize("case", REFERENCE["mcnemar_exact"], ids=lambda c: str(c["table"]))
def test_mcnemar_exact_is_statsmodels(case: dict[str, Any]) -> None:
    (both, only_a), (only_b, neither) = case["table"]
    a = np.array([1] * both + [1] * only_a + [0] * only_b + [0] * neither)
    b = np.array([1] * both + [0] * only_a + [1] * only_b + [0] * neither)
    res = st.mcnemar_exact(a, b)
    assert (res.only_a, res.only_b) == (only_a, only_b)
    assert min(res.only_a, res.only_b) == case["statistic"]
    assert res.p_value == pytest.approx(case["p_value"], rel=EXACT)


@pytest.mark.parametrize("case", REFERENCE["wilson"], ids=lambda c: f"{c['count']}/{c['nobs']}")
def test_wilson_is_statsmodels(case: dict[str, Any]) -> None:
    low, high = st.wilson_interval(case["count"], case["nobs"], 1 - case["alpha"])
    assert low == pytest.approx(case["low"], rel=EXACT, abs=1e-15)
    assert high == pytest.approx(case["high"], rel=EXACT)


@pytest.mark.parametrize("case", REFERENCE["multipletests"], ids=lambda c: f"{len(c['p'])}p")
def test_holm_and_bh_are_statsmodels(case: dict[str, Any]) -> None:
    p = np.array(case["p"])
    np.testing.assert_allclose(st.holm(p), case["holm"], rtol=EXACT, atol=0)
    np.testing.assert_allclose(st.benjamini_hochberg(p), case["fdr_bh"], rtol=EXACT, atol=0)
    assert st.ADJUSTMENTS["bh"] is st.benjamini_hochberg and st.ADJUSTMENTS["holm"] is st.holm


@pytest.mark.parametrize("case", REFERENCE["ttest_power"]["power"], ids=lambda c: f"d{c['effect_size']}n{c['nobs']}")
def test_power_is_statsmodels_ttestpower(case: dict[str, Any]) -> None:
    power = st.ttest_power(case["effect_size"], case["nobs"], case["alpha"])
    assert power == pytest.approx(case["power"], rel=EXACT)


@pytest.mark.parametrize("case", REFERENCE["ttest_power"]["effect_size"], ids=lambda c: f"n{c['nobs']}")
def test_detectable_effect_size_is_statsmodels_ttestpower(case: dict[str, Any]) -> None:
    es = st.effect_size_for_power(case["nobs"], case["alpha"], case["power"])
    assert es == pytest.approx(case["effect_size"], rel=SOLVED)
    assert st.ttest_power(es, case["nobs"], case["alpha"]) == pytest.approx(case["power"], abs=1e-12)
    assert st.minimum_detectable_effect(case["nobs"], 0.25, case["alpha"], case["power"]) == pytest.approx(0.25 * es)


@pytest.mark.parametrize("case", REFERENCE["ttest_power"]["nobs"], ids=lambda c: f"d{c['effect_size']}")
def test_sample_size_is_statsmodels_ttestpower(case: dict[str, Any]) -> None:
    n = st.nobs_for_power(case["effect_size"], case["alpha"], case["power"])
    assert n == pytest.approx(case["nobs"], rel=SOLVED)


@pytest.mark.parametrize("case", REFERENCE["ttest_rel"], ids=lambda c: f"{len(c['a'])}tasks")
def test_paired_difference_is_scipys_ttest_rel(case: dict[str, Any]) -> None:
    a, b = np.array(case["a"]), np.array(case["b"])
    res = st.paired_difference(a, b)
    assert res.df == case["df"] and res.tasks == len(a)
    assert res.t_statistic == pytest.approx(case["statistic"], rel=EXACT)
    assert res.p_value == pytest.approx(case["p_value"], rel=EXACT)
    assert res.ci_low == pytest.approx(case["ci_low"], rel=EXACT)
    assert res.ci_high == pytest.approx(case["ci_high"], rel=EXACT)
    assert res.difference == pytest.approx(float(np.mean(a - b)), rel=EXACT)
