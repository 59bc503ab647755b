"""Reference vectors for gym_metrics.statistics from independent implementations.

Runs in a throwaway environment, never in the project's own (the references are not project
dependencies):

    python3 -m venv /tmp/statref
    /tmp/statref/bin/pip install statsmodels scipy inspect-ai
    /tmp/statref/bin/python scripts/make_statistics_reference.py

Writes tests/data/statistics/reference.json: seeded inputs, what inspect-ai (`stderr`,
`stderr(cluster=...)`, `bootstrap_stderr`), statsmodels (`mcnemar(exact=True)`,
`proportion_confint(method="wilson")`, `multipletests` holm / fdr_bh, `TTestPower`) and scipy
(`ttest_rel`) return for them, and the versions used. tests/statistics/test_reference.py
compares gym-metrics' numbers to these.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "statistics" / "reference.json"


def clustered_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    """inspect-ai's stderr with and without cluster=, on binary and continuous scores."""
    from inspect_ai.scorer import SampleScore, Score, stderr

    cases = []
    for tasks, repeats, binary in [(5, 1, False), (12, 3, True), (40, 4, False), (25, 2, True), (60, 5, True)]:
        skill = rng.uniform(0, 1, tasks)
        counts = rng.integers(1, repeats + 1, tasks) if repeats > 1 and tasks % 2 else np.full(tasks, repeats)
        clusters = np.repeat(np.arange(tasks) * 7 + 3, counts)  # sparse, non-contiguous ids
        p = np.repeat(skill, counts)
        values = (rng.uniform(0, 1, len(p)) < p).astype(float) if binary else p + rng.normal(0, 0.3, len(p))
        scores = [
            SampleScore(score=Score(value=float(v)), sample_id=i, sample_metadata={"task": int(c)})
            for i, (v, c) in enumerate(zip(values, clusters))
        ]
        cases.append({
            "values": values.tolist(),
            "clusters": clusters.tolist(),
            "cluster_stderr": float(stderr(cluster="task")(scores)),  # type: ignore[arg-type]
            "stderr": float(stderr()(scores)),  # type: ignore[arg-type]
        })
    return cases


def bootstrap_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    """inspect-ai's bootstrap_stderr (random, seeded through numpy's global state): close to the
    analytic standard error of independent values, not equal to it."""
    from inspect_ai.scorer import SampleScore, Score, bootstrap_stderr

    cases = []
    for n in (50, 200):
        values = rng.normal(0.5, 0.2, n)
        scores = [SampleScore(score=Score(value=float(v)), sample_id=i) for i, v in enumerate(values)]
        np.random.seed(n)
        cases.append({"values": values.tolist(), "bootstrap_stderr": float(bootstrap_stderr(num_samples=5000)(scores))})  # type: ignore[arg-type]
    return cases


def mcnemar_cases() -> list[dict[str, Any]]:
    from statsmodels.stats.contingency_tables import mcnemar

    out = []
    for both, only_a, only_b, neither in [(10, 3, 9, 5), (0, 0, 0, 4), (7, 5, 5, 1), (40, 1, 12, 30), (100, 37, 21, 50)]:
        res = mcnemar(np.array([[both, only_a], [only_b, neither]]), exact=True)
        out.append({"table": [[both, only_a], [only_b, neither]], "statistic": float(res.statistic), "p_value": float(res.pvalue)})
    return out


def wilson_cases() -> list[dict[str, Any]]:
    from statsmodels.stats.proportion import proportion_confint

    out = []
    for count, nobs, alpha in [(0, 10, 0.05), (10, 10, 0.05), (7, 20, 0.05), (123, 400, 0.01), (1, 3, 0.1), (4999, 10000, 0.05)]:
        low, high = proportion_confint(count, nobs, alpha=alpha, method="wilson")
        out.append({"count": count, "nobs": nobs, "alpha": alpha, "low": float(low), "high": float(high)})
    return out


def multipletests_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    from statsmodels.stats.multitest import multipletests

    out = []
    for p in [rng.uniform(0, 0.1, 8), rng.uniform(0, 1, 15), np.array([0.01, 0.01, 0.04, 0.5, 0.04, 0.9]), np.array([0.03])]:
        out.append({
            "p": p.tolist(),
            "holm": multipletests(p, method="holm")[1].tolist(),
            "fdr_bh": multipletests(p, method="fdr_bh")[1].tolist(),
        })
    return out


def power_cases() -> dict[str, Any]:
    from statsmodels.stats.power import TTestPower

    tp = TTestPower()
    effect = [
        {"nobs": n, "alpha": a, "power": pw, "effect_size": float(tp.solve_power(effect_size=None, nobs=n, alpha=a, power=pw))}
        for n, a, pw in [(10, 0.05, 0.8), (50, 0.05, 0.8), (200, 0.05, 0.8), (1000, 0.01, 0.9), (3, 0.05, 0.8)]
    ]
    nobs = [
        {"effect_size": d, "alpha": a, "power": pw, "nobs": float(tp.solve_power(effect_size=d, nobs=None, alpha=a, power=pw))}
        for d, a, pw in [(0.5, 0.05, 0.8), (0.1, 0.05, 0.8), (0.05, 0.01, 0.9), (1.2, 0.05, 0.8)]
    ]
    power = [
        {"effect_size": d, "nobs": n, "alpha": a, "power": float(tp.power(effect_size=d, nobs=n, alpha=a))}
        for d, n, a in [(0.3, 30, 0.05), (0.1, 500, 0.05), (0.0, 20, 0.05), (0.8, 8, 0.01)]
    ]
    return {"effect_size": effect, "nobs": nobs, "power": power}


def ttest_rel_cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    from scipy.stats import ttest_rel

    out = []
    for n in (5, 30, 300):
        difficulty = rng.uniform(0, 1, n)
        a = np.clip(difficulty + rng.normal(0.03, 0.1, n), 0, 1)
        b = np.clip(difficulty + rng.normal(0.0, 0.1, n), 0, 1)
        res = ttest_rel(a, b)
        ci = res.confidence_interval(0.95)
        out.append({
            "a": a.tolist(), "b": b.tolist(), "statistic": float(res.statistic), "p_value": float(res.pvalue),
            "df": float(res.df), "ci_low": float(ci.low), "ci_high": float(ci.high),
        })  # fmt: skip
    return out


def main() -> None:
    rng = np.random.default_rng(20261123)
    reference = {
        "versions": {name: version(name) for name in ("inspect-ai", "statsmodels", "scipy", "numpy")},
        "clustered_stderr": clustered_cases(rng),
        "bootstrap_stderr": bootstrap_cases(rng),
        "mcnemar_exact": mcnemar_cases(),
        "wilson": wilson_cases(),
        "multipletests": multipletests_cases(rng),
        "ttest_power": power_cases(),
        "ttest_rel": ttest_rel_cases(rng),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(reference, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
