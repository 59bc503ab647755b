"""Paired agent comparison (issue 4 item 6): exact point estimates, a seeded paired bootstrap."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import gym_metrics.compare._bootstrap as compare_mod
from gym_metrics.rollouts import RolloutColumns
from gym_metrics.compare import compare_agents, task_rewards
from gym_metrics.errors import GymMetricsError, InvalidInputError, NotFoundError
from gym_metrics.reducers import REDUCERS, Reducer, TaskRewardsLike, get_reducer, register_reducer


def rows_of(agent: str, tasks: Sequence[Sequence[float]], first_task: int = 0, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"agent_ref": {"name": agent}, "_ng_task_index": first_task + t, "_ng_rollout_index": r, "reward": v, **extra}
        for t, rewards in enumerate(tasks)
        for r, v in enumerate(rewards)
    ]


def agents(**by_name: Sequence[Sequence[float]]) -> dict[str, RolloutColumns]:
    return {name: RolloutColumns.from_rows(rows_of(name, tasks)) for name, tasks in by_name.items()}


A = [[1, 0], [1, 1], [0, 0], [1, 0]]
B = [[0, 0], [1, 0], [0, 0], [1, 1]]


@pytest.mark.parametrize(
    ("metric", "va", "vb"),
    [
        ("mean_reward", (0.5 + 1 + 0 + 0.5) / 4, (0 + 0.5 + 0 + 1) / 4),
        ("avg", 0.5, 0.375),
        ("pass_rate", 4 / 8, 3 / 8),
        ("pass@1", 3 / 4, 2 / 4),
        ("pass@2", 3 / 4, 2 / 4),
        ("pass^2", 1 / 4, 1 / 4),
    ],
)
def test_point_estimate_is_exact(metric: str, va: float, vb: float) -> None:
    c = compare_agents(agents(a=A, b=B), "a", "b", metric=metric, resamples=200)
    assert (c.value_a, c.value_b) == (pytest.approx(va), pytest.approx(vb))
    assert c.difference == pytest.approx(va - vb)
    assert c.common_tasks == 4 and c.only_a_tasks == () and c.only_b_tasks == ()


def test_values_are_the_reducers_values() -> None:
    for name in ("mean_reward", "pass_rate", "pass@1", "pass@2", "pass^2", "unbiased_pass@2", "unbiased_pass^2"):
        c = compare_agents(agents(a=A, b=B), "a", "b", metric=name, resamples=10)
        assert c.value_a == pytest.approx(get_reducer(name).compute(A)), name
        assert c.value_b == pytest.approx(get_reducer(name).compute(B)), name


def test_first_k_uses_rollout_order_not_file_order() -> None:
    rows = rows_of("a", [[0, 1], [0, 1]]) + rows_of("b", [[0, 0], [0, 0]])
    rows = rows[::-1]  # file order reversed; rollout 0 still comes first
    cols = {n: RolloutColumns.from_rows([r for r in rows if r["agent_ref"]["name"] == n]) for n in "ab"}
    assert compare_agents(cols, "a", "b", metric="pass@1", resamples=10).value_a == 0.0


def typical() -> dict[str, RolloutColumns]:
    rng = np.random.default_rng(7)
    skill = rng.uniform(0, 1, 60)
    a = (rng.uniform(0, 1, (60, 4)) < np.clip(skill + 0.15, 0, 1)[:, None]).astype(float)
    b = (rng.uniform(0, 1, (60, 4)) < skill[:, None]).astype(float)
    return agents(a=a.tolist(), b=b.tolist())


def test_interval_is_deterministic_for_a_seed_and_contains_the_estimate() -> None:
    data = typical()
    c1 = compare_agents(data, "a", "b", resamples=2000, seed=3)
    c2 = compare_agents(data, "a", "b", resamples=2000, seed=3)
    c3 = compare_agents(data, "a", "b", resamples=2000, seed=4)
    assert c1 == c2
    assert c3.standard_error != c1.standard_error  # the seed matters (percentiles sit on a grid)
    assert c1.ci_low < c1.difference < c1.ci_high
    assert c1.standard_error > 0 and c1.resamples == 2000 and c1.seed == 3


def test_chunked_draws_give_the_same_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    data = typical()
    whole = compare_agents(data, "a", "b", resamples=500, seed=1)
    monkeypatch.setattr(compare_mod, "_MAX_DRAW", 60 * 7)  # 7 resamples per chunk
    assert compare_agents(data, "a", "b", resamples=500, seed=1) == whole


def test_identical_agents_give_zero_with_a_zero_width_interval() -> None:
    data = typical()
    data["c"] = data["b"]
    for other in ("b", "c"):
        c = compare_agents(data, "b", other, metric="pass_rate", resamples=500)
        assert (c.difference, c.ci_low, c.ci_high, c.standard_error) == (0.0, 0.0, 0.0, 0.0)


def test_resampling_is_paired() -> None:
    """Tasks range from easy to hopeless; A beats B by exactly 0.1 on every task. Paired, every
    resample says +0.1; resampling each agent's tasks independently gives a wide interval."""
    b = [[0.0, 0.0] if t % 2 else [0.9, 0.9] for t in range(40)]
    a = [[x + 0.1 for x in task] for task in b]
    c = compare_agents(agents(a=a, b=b), "a", "b", resamples=2000)
    assert c.difference == pytest.approx(0.1)
    assert c.ci_high - c.ci_low < 1e-9 and c.ci_low == pytest.approx(0.1)

    ma, mb = np.mean(a, axis=1), np.mean(b, axis=1)
    rng = np.random.default_rng(0)
    unpaired = ma[rng.integers(0, 40, (2000, 40))].mean(1) - mb[rng.integers(0, 40, (2000, 40))].mean(1)
    low, high = np.percentile(unpaired, [2.5, 97.5])
    assert high - low > 0.2


def test_only_common_measured_tasks_are_used() -> None:
    rows = rows_of("a", [[1], [1], [1], [1]]) + rows_of("b", [[0], [0]], first_task=1) + rows_of("b", [[1]], first_task=7)
    rows += rows_of("b", [[1]], first_task=3, mask_sample=True)  # masked: b has no measured task 3
    rows += [{"agent_ref": {"name": "b"}, "_ng_task_index": 0, "_ng_rollout_index": 0}]  # no reward
    by = {n: RolloutColumns.from_rows([r for r in rows if r["agent_ref"]["name"] == n]) for n in "ab"}
    c = compare_agents(by, "a", "b", resamples=100)
    assert c.common_tasks == 2 and c.difference == 1.0
    assert c.only_a_tasks == (0, 3) and c.only_b_tasks == (7,)
    assert "2 task(s) measured only for a (the other's rollouts of them are absent, failed or masked; not used): 0, 3" in c.summary()


def test_a_repeated_key_is_refused_as_aggregation_refuses_it() -> None:
    rows = rows_of("a", [[1, 0], [1]]) + rows_of("a", [[0]], first_task=1, mask_sample=True)  # masked, still a repeat
    data = {"a": RolloutColumns.from_rows(rows), "b": agents(b=B)["b"]}
    with pytest.raises(InvalidInputError, match="1 duplicate") as caught:
        compare_agents(data, "a", "b", resamples=10)
    assert [str(v) for v in caught.value.violations] == [
        "(_ng_task_index, _ng_rollout_index): duplicate key (task 1, rollout 0)"
    ]


def test_task_rewards_groups_by_task_in_rollout_order() -> None:
    rows = rows_of("a", [[0.25, 0.5], [1.0]], first_task=3)
    tasks, tr = task_rewards(RolloutColumns.from_rows(rows[::-1]))
    assert tasks.tolist() == [3, 4] and [t.tolist() for t in tr] == [[0.25, 0.5], [1.0]]
    assert [t.tolist() for t in tr.take(np.array([1, 0, 1]))] == [[1.0], [0.25, 0.5], [1.0]]


def test_errors_unknown_agent_few_common_tasks_bad_metric() -> None:
    data = agents(a=A, b=B, c=[[1]])
    with pytest.raises(NotFoundError, match="unknown agent 'z'; agents: a, b, c"):
        compare_agents(data, "a", "z")
    with pytest.raises(InvalidInputError, match="share 1 task"):
        compare_agents(data, "a", "c")
    with pytest.raises(NotFoundError, match="unknown reducer 'no_such_metric'; known: .*mean_reward"):
        compare_agents(data, "a", "b", metric="no_such_metric", resamples=10)


@pytest.fixture
def best_of() -> Iterator[None]:
    """A registered reducer without per-task terms: recomputed on every resample."""
    before = REDUCERS.snapshot()

    @register_reducer("best_of")
    class BestOf(Reducer):
        def compute(self, task_rewards: TaskRewardsLike) -> float:
            return float(np.mean([max(t) for t in task_rewards]))

    yield
    REDUCERS.restore(before)


def test_other_reducers_are_recomputed_per_resample(best_of: None) -> None:
    data = typical()
    c = compare_agents(data, "a", "b", metric="best_of", resamples=300, seed=5)
    assert c.difference == pytest.approx(
        compare_agents(data, "a", "b", metric="pass@4", resamples=10).difference  # same thing for 0/1 rewards
    )
    assert c == compare_agents(data, "a", "b", metric="best_of", resamples=300, seed=5)
    assert c.ci_low <= c.difference <= c.ci_high
    with pytest.raises(NotFoundError, match="known: .*best_of"):
        compare_agents(data, "a", "b", metric="nope", resamples=10)


def test_the_bootstrap_scores_both_agents_on_the_tasks_the_reducer_counts_for_both() -> None:
    """unbiased_pass@3 counts tasks with 3+ samples. Each agent was scored on its own counted
    tasks: A, with 3 samples only on its easy tasks, beat an equal B by +0.5 and passed a gate.
    Now, as the paired method, only tasks counted for both are drawn."""
    data = agents(a=[[1, 1, 1], [1, 1, 1], [0], [0]], b=[[1, 1, 1], [1, 1, 1], [0, 0, 0], [0, 0, 0]])
    c = compare_agents(data, "a", "b", metric="unbiased_pass@3", resamples=400, seed=1)
    assert (c.value_a, c.value_b, c.difference, c.ci_low, c.ci_high, c.common_tasks) == (1.0, 1.0, 0.0, 0.0, 0.0, 2)
    assert "2 common task(s) unbiased_pass@3 does not count for both agents: not used" in c.summary()
    with pytest.raises(InvalidInputError, match="counts fewer than 2 of the common tasks"):  # k past every task: no number, not 0 vs 0
        compare_agents(data, "a", "b", metric="unbiased_pass@5", resamples=400, seed=1)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gym_metrics.cli", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_cli_compare_text_json_and_errors(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    rows = rows_of("a", A) + rows_of("b", B) + rows_of("b", [[1]], first_task=9)
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    proc = run("compare", str(src), "--agents", "a", "b", "--method", "bootstrap", "--resamples", "500")
    assert proc.returncode == 0, proc.stderr
    assert "mean_reward: a - b = +0.1250" in proc.stdout and "4 common tasks" in proc.stdout
    assert "1 task(s) measured only for b (the other's rollouts of them are absent, failed or masked; not used): 9" in proc.stdout
    proc = run("compare", str(src), "--agents", "a", "b", "--method", "bootstrap", "--metric", "pass@1", "--resamples", "500", "--seed", "2", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    expected = compare_agents(src, "a", "b", metric="pass@1", resamples=500, seed=2)
    assert out == expected.to_dict()
    assert out["difference"] == 0.25 and out["only_b_tasks"] == [9] and out["common_tasks"] == 4
    proc = run("compare", str(src), "--agents", "a", "zz")
    assert proc.returncode == 2 and "unknown agent 'zz'" in proc.stderr and "a, b" in proc.stderr
    assert "Traceback" not in proc.stderr
