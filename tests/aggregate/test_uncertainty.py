"""The uncertainty keys gym-metrics adds to agent_metrics (issue 16 items 1-2), checked against
the statistics package's own formulas on the raw rows (those are checked against inspect-ai
and statsmodels in tests/statistics), and their absence where they are undefined."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gym_metrics.aggregate import ADDED_AGENT_METRICS, aggregate_file
from gym_metrics.statistics import cluster_stderr, t_quantile, variance_components, wilson_interval


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def metrics(path: Path) -> dict[str, Any]:
    out, _, _ = aggregate_file(path)
    agent_metrics: dict[str, Any] = json.loads(out.read_text())[0]["agent_metrics"]
    return agent_metrics


def rollouts(seed: int = 3) -> list[dict[str, Any]]:
    """40 tasks of 1-6 rollouts: a 0/1 reward, a continuous score missing from some rows."""
    rng = np.random.default_rng(seed)
    rows = []
    for task in range(40):
        p = rng.uniform()
        for rollout in range(int(rng.integers(1, 7))):
            row = {"agent_ref": {"name": "a"}, "_ng_task_index": task, "_ng_rollout_index": rollout,
                   "reward": float(rng.uniform() < p)}  # fmt: skip
            if rng.uniform() < 0.9:
                row["score"] = float(np.round(p + rng.normal(0, 0.2), 6))
            rows.append(row)
    return rows


def test_the_added_keys_match_the_formulas_on_the_raw_rows(tmp_path: Path) -> None:
    rows = rollouts()
    got = metrics(write(tmp_path / "r.jsonl", rows))
    for field in ("reward", "score"):
        have = [r for r in rows if field in r]
        x = np.array([r[field] for r in have])
        tasks = np.array([r["_ng_task_index"] for r in have])
        se = cluster_stderr(x, tasks)
        assert got[f"mean/{field}"] == pytest.approx(x.mean(), rel=1e-12)
        assert got[f"cluster_stderr/{field}"] == pytest.approx(se, rel=1e-9)
        half = t_quantile(len(set(tasks.tolist())) - 1, 0.975) * se
        assert got[f"cluster_ci_low_95/{field}"] == pytest.approx(x.mean() - half, rel=1e-9)
        assert got[f"cluster_ci_high_95/{field}"] == pytest.approx(x.mean() + half, rel=1e-9)
        parts = variance_components(x, tasks)
        assert got[f"var_between/{field}"] == pytest.approx(parts.between, rel=1e-9, abs=1e-15)
        assert got[f"var_within/{field}"] == pytest.approx(parts.within, rel=1e-9)
    rewards = np.array([r["reward"] for r in rows])
    low, high = wilson_interval(int(rewards.sum()), len(rewards))
    assert (got["wilson_ci_low_95/reward"], got["wilson_ci_high_95/reward"]) == pytest.approx((low, high), rel=1e-12)
    assert "wilson_ci_low_95/score" not in got  # not a 0/1 field
    added = [k for k in got if k.split("/", 1)[0] in ADDED_AGENT_METRICS]
    assert added == sorted(added, key=lambda k: (ADDED_AGENT_METRICS.index(k.split("/")[0]), k))  # documented order


def test_clustering_widens_the_error_when_repeats_agree(tmp_path: Path) -> None:
    """Tasks of 8 identical repeats: 8 rollouts carry one task's information, so the
    clustered error is sqrt(8) times the naive one (up to the finite-cluster factor)."""
    rows = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float(t % 3 == 0)}
            for t in range(30) for r in range(8)]  # fmt: skip
    got = metrics(write(tmp_path / "r.jsonl", rows))
    x = np.array([r["reward"] for r in rows])
    naive = x.std(ddof=1) / np.sqrt(len(x))
    assert got["cluster_stderr/reward"] / naive == pytest.approx(np.sqrt(8) * np.sqrt(30 / 29 * 239 / 240), rel=1e-6)
    assert got["var_within/reward"] == 0.0 and got["var_between/reward"] > 0


def test_undefined_parts_are_left_out(tmp_path: Path) -> None:
    one_task = [{"agent_ref": {"name": "a"}, "_ng_task_index": 0, "_ng_rollout_index": r, "reward": r % 2} for r in range(4)]
    got = metrics(write(tmp_path / "one.jsonl", one_task))
    assert not any(k.startswith(("cluster_", "var_between/")) for k in got)
    assert "var_within/reward" in got and "wilson_ci_low_95/reward" in got
    single = [{"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": 0, "reward": 0.5 * t} for t in range(5)]
    got = metrics(write(tmp_path / "single.jsonl", single))
    assert "var_within/reward" not in got and "cluster_stderr/reward" in got  # one rollout per task
    x = 0.5 * np.arange(5)
    assert got["cluster_stderr/reward"] == pytest.approx(x.std(ddof=1) / np.sqrt(5), rel=1e-12)  # plain s / sqrt(n)
