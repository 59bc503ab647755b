"""Reward reducers (docs/metrics.md#reward-reducers): exact values on the test vector and edge
cases, a brute-force
reference on random ragged data, the registry, and the uncertainty estimates."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from fractions import Fraction
from typing import ClassVar

import numpy as np
import pytest
import scipy.stats

from gym_metrics.errors import InvalidInputError, NotFoundError
from gym_metrics.reducers import (
    PASS_THRESHOLD,
    REDUCERS,
    MeanOverTasks,
    Reducer,
    PassAtK,
    PassHatK,
    TaskRewards,
    UnbiasedPassAtK,
    UnbiasedPassHatK,
    get_reducer,
    register_reducer,
    reducer_names,
    summarize_reducers,
)

V1 = [[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
BUILTINS = ["mean_reward", "avg", "pass_rate", "pass@1", "pass@2", "pass^2", "unbiased_pass@2", "unbiased_pass^2"]


@pytest.fixture
def clean_registry() -> Iterator[None]:
    """Undo registrations made by a test."""
    before = REDUCERS.snapshot()
    yield
    REDUCERS.restore(before)


def value(name: str, tasks: object) -> float:
    return get_reducer(name).compute(tasks)  # type: ignore[arg-type]


# ---------------------------------------------- test vector (docs/metrics.md#reducer-test-vector)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mean_reward", Fraction(1, 2)),
        ("avg", Fraction(1, 2)),
        ("pass_rate", Fraction(1, 2)),
        ("pass@2", Fraction(2, 3)),
        ("pass^2", Fraction(1, 3)),
    ],
)
def test_spec_vector_exact(name: str, expected: Fraction) -> None:
    assert value(name, V1) == float(expected)  # correctly rounded: exact equality


@pytest.mark.parametrize(("name", "expected"), [("unbiased_pass@2", Fraction(11, 18)), ("unbiased_pass^2", Fraction(7, 18))])
def test_spec_vector_unbiased(name: str, expected: Fraction) -> None:
    assert value(name, V1) == pytest.approx(float(expected), rel=1e-14)
    assert value(name, V1) == pytest.approx(float(reference(name, V1)), rel=1e-14)


def test_first_k_and_unbiased_are_different_metrics() -> None:
    assert value("pass@2", V1) != pytest.approx(value("unbiased_pass@2", V1))
    assert value("pass^2", V1) != pytest.approx(value("unbiased_pass^2", V1))


def test_first_k_depends_on_order_unbiased_does_not() -> None:
    assert value("pass@1", [[0, 1]]) == 0.0
    assert value("pass@1", [[1, 0]]) == 1.0
    assert value("unbiased_pass@1", [[0, 1]]) == value("unbiased_pass@1", [[1, 0]]) == 0.5


# ----------------------------------------------------------------------------- edge cases


def test_no_tasks() -> None:
    for name in BUILTINS:
        result = get_reducer(name).summarize([])
        assert (result.value, result.tasks_used, result.tasks_dropped) == (0.0, 0, 0)
        assert result.stderr is result.ci_low is result.ci_high is None


def test_empty_tasks() -> None:
    tasks: list[list[float]] = [[], [1, 1], []]
    assert value("mean_reward", tasks) == 1.0  # empty tasks have no mean: skipped
    assert value("pass_rate", tasks) == 1.0
    assert value("pass@1", tasks) == float(Fraction(1, 3))  # an empty task fails
    assert value("pass^1", tasks) == float(Fraction(1, 3))  # never all([])
    assert value("unbiased_pass@1", tasks) == 1.0  # skipped, not scored
    assert value("unbiased_pass^2", tasks) == 1.0
    assert _counts("mean_reward", tasks) == (1, 2)
    assert _counts("pass_rate", tasks) == (1, 2)
    assert _counts("pass^1", tasks) == (3, 0)
    assert _counts("unbiased_pass^2", tasks) == (1, 2)
    assert value("pass^3", [[]]) == 0.0
    assert value("mean_reward", [[], []]) == 0.0


def test_tasks_shorter_than_k() -> None:
    tasks = [[1], [0, 1, 1]]
    # first-k: a short task uses the samples it has
    assert value("pass@2", tasks) == 1.0
    assert value("pass^2", tasks) == 0.5  # [1] all pass, [0, 1] does not
    assert value("pass^5", [[1, 1]]) == 1.0
    assert value("pass@5", [[0, 0]]) == 0.0
    # unbiased: a task with n < k has no estimate: dropped and counted, never 1.0
    assert value("unbiased_pass@2", tasks) == 1.0  # only [0, 1, 1]: 1 - C(1,2)/C(3,2) = 1
    assert value("unbiased_pass^2", tasks) == pytest.approx(1 / 3, rel=1e-14)  # C(2,2)/C(3,2)
    assert _counts("unbiased_pass@2", tasks) == (1, 1)
    assert value("unbiased_pass@4", tasks) == 0.0 and _counts("unbiased_pass@4", tasks) == (0, 2)
    assert value("unbiased_pass^8", [[1, 1, 1]]) == 0.0
    assert _counts("pass@8", tasks) == (2, 0)


def test_rewards_above_one() -> None:
    tasks = [[2.0, 0.5], [1.5]]
    assert value("mean_reward", tasks) == (1.25 + 1.5) / 2
    assert value("pass_rate", tasks) == float(Fraction(2, 3))
    assert value("pass@1", tasks) == 1.0
    assert value("pass^2", tasks) == 0.5
    assert value("unbiased_pass@1", tasks) == 0.75  # (1/2 + 1) / 2
    assert value("unbiased_pass^2", tasks) == 0.0 and _counts("unbiased_pass^2", tasks) == (1, 1)


def test_fractional_rewards_and_threshold() -> None:
    tasks = [[0.5, 0.99], [0.25], [0.999999, 1.0]]
    assert value("mean_reward", tasks) == pytest.approx((0.745 + 0.25 + 0.9999995) / 3, rel=1e-15)
    assert value("pass_rate", tasks) == float(Fraction(1, 5))  # only the 1.0 reaches the threshold
    assert value("pass@1", tasks) == 0.0
    assert value("pass@2", tasks) == float(Fraction(1, 3))
    assert PASS_THRESHOLD == 1.0


def test_single_task() -> None:
    tasks = [[1, 0, 1]]
    assert value("mean_reward", tasks) == float(Fraction(2, 3))
    assert value("pass@1", tasks) == 1.0 and value("pass^3", tasks) == 0.0
    assert value("unbiased_pass@2", tasks) == 1.0
    assert value("unbiased_pass^2", tasks) == pytest.approx(1 / 3, rel=1e-14)
    mean = get_reducer("mean_reward").summarize(tasks)
    assert mean.tasks_used == 1 and mean.stderr is None and mean.ci_low is None  # no spread over one task
    rate = get_reducer("pass_rate").summarize(tasks)
    assert rate.stderr == pytest.approx(math.sqrt(2 / 9 / 3)) and rate.ci_low is not None  # 3 samples


def test_non_finite_rewards_are_not_samples() -> None:
    nan, inf = float("nan"), float("inf")
    assert value("pass@1", [[nan, 1.0]]) == 1.0  # the first sample with a reward
    assert value("mean_reward", [[nan, 1.0, 0.0], [inf]]) == 0.5
    assert _counts("mean_reward", [[nan, 1.0, 0.0], [inf]]) == (1, 1)


def test_inputs_lists_arrays_and_taskrewards_agree() -> None:
    padded = np.array([[1, 0, 1, 0], [0, 0, 0, 0], [1, 1, np.nan, np.nan]])
    lists = [[1, 0, 1, 0], [0, 0, 0, 0], [1, 1]]
    flat = TaskRewards(np.array([1, 0, 1, 0, 0, 0, 0, 0, 1, 1.0]), np.array([0, 4, 8, 10]))
    for name in BUILTINS:
        assert value(name, padded) == value(name, lists) == value(name, flat) == value(name, tuple(map(tuple, lists)))


def test_bad_inputs() -> None:
    with pytest.raises(InvalidInputError, match=r"task_rewards\[1\]\[0\]"):
        value("mean_reward", [[1.0], ["x"]])
    with pytest.raises(InvalidInputError, match="2 dimensions"):
        value("mean_reward", np.zeros(3))


# ----------------------------------------------------------------------------- brute-force reference


def reference(name: str, tasks: Sequence[Sequence[float]]) -> Fraction:
    """docs/metrics.md#reward-reducers, literally, in exact arithmetic."""
    passed = [[r >= 1.0 for r in t] for t in tasks]
    if name in ("mean_reward", "avg"):
        means = [sum(map(Fraction, t)) / len(t) for t in tasks if t]
        return sum(means, Fraction(0)) / len(means) if means else Fraction(0)
    if name == "pass_rate":
        total = sum(len(t) for t in tasks)
        return Fraction(sum(map(sum, passed)), total) if total else Fraction(0)
    family, k = name.rsplit("@", 1) if "@" in name else name.rsplit("^", 1)
    k = int(k)
    if name.startswith("pass@"):
        scores = [Fraction(any(p[:k])) for p in passed]
    elif name.startswith("pass^"):
        scores = [Fraction(bool(p) and all(p[:k])) for p in passed]
    elif name.startswith("unbiased_pass@"):
        scores = [1 - Fraction(math.comb(len(p) - sum(p), k), math.comb(len(p), k)) for p in passed if len(p) >= k]
    else:
        scores = [Fraction(math.comb(sum(p), k), math.comb(len(p), k)) for p in passed if len(p) >= k]
    return sum(scores, Fraction(0)) / len(scores) if scores else Fraction(0)


@pytest.mark.parametrize("seed", range(8))
def test_matches_reference_on_random_ragged_tasks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tasks = [rng.choice([0.0, 0.5, 1.0, 1.0, 2.0], size=rng.integers(0, 11)).tolist() for _ in range(rng.integers(1, 60))]
    for k in (1, 2, 3, 5, 8):
        for family in ("pass@", "pass^"):
            assert value(f"{family}{k}", tasks) == float(reference(f"{family}{k}", tasks))
        for family in ("unbiased_pass@", "unbiased_pass^"):
            assert value(f"{family}{k}", tasks) == pytest.approx(float(reference(f"{family}{k}", tasks)), rel=1e-12, abs=1e-15)
    assert value("mean_reward", tasks) == pytest.approx(float(reference("mean_reward", tasks)), rel=1e-14)
    assert value("pass_rate", tasks) == float(reference("pass_rate", tasks))


def test_matrix_fast_path_equals_ragged_path() -> None:
    """Equal-length tasks are counted by rows; one empty task more takes the general path."""
    rng = np.random.default_rng(11)
    matrix = rng.choice([0.0, 1.0, 0.5], size=(300, 6))
    square = TaskRewards.of(matrix)
    ragged = TaskRewards.of([*matrix.tolist(), []])
    assert square.width == 6 and ragged.width is None
    for name in ("pass@1", "pass@4", "pass@9", "pass^3", "pass^6", "unbiased_pass@2", "unbiased_pass^5", "mean_reward"):
        metric = get_reducer(name)
        a, _ = metric.task_scores(square)  # type: ignore[attr-defined]
        b, _ = metric.task_scores(ragged)  # type: ignore[attr-defined]
        assert a.tolist() == b[:-1].tolist(), name


@pytest.mark.parametrize("name", [*BUILTINS, "pass@5", "pass^5", "unbiased_pass@5", "unbiased_pass^5"])
def test_task_terms_give_the_value_of_any_resample(name: str) -> None:
    """sum(numerator) / sum(weight) over a multiset of tasks is the reducer's value on those
    tasks: what compare's vectorised paired bootstrap relies on."""
    rng = np.random.default_rng(2)
    tasks = TaskRewards.of([rng.choice([0.0, 0.5, 1.0], size=rng.integers(0, 9)).tolist() for _ in range(80)])
    reducer = get_reducer(name)
    terms = reducer.task_terms(tasks)
    assert terms is not None
    numerator, weight = terms
    for _ in range(20):
        idx = rng.integers(0, len(tasks), len(tasks))
        total = weight[idx].sum()
        ratio = numerator[idx].sum() / total if total else 0.0
        assert ratio == pytest.approx(reducer.compute(tasks.take(idx)), rel=1e-12, abs=1e-15), name


def test_a_plain_reducer_has_no_task_terms(clean_registry: None) -> None:
    @register_reducer("first_reward")
    class FirstReward(Reducer):
        def compute(self, task_rewards: Sequence[Sequence[float]]) -> float:
            return float(task_rewards[0][0])

    assert get_reducer("first_reward").task_terms(TaskRewards.of(V1)) is None


def test_unbiased_is_stable_for_large_n() -> None:
    """Factorials overflow a float at 171; the product form does not."""
    n, c, k = 1000, 3, 100
    tasks = [[1.0] * c + [0.0] * (n - c)]
    expected = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert value(f"unbiased_pass@{k}", tasks) == pytest.approx(float(expected), rel=1e-12)
    tasks = [[1.0] * 990 + [0.0] * 10]
    assert value("unbiased_pass^500", tasks) == pytest.approx(float(Fraction(math.comb(990, 500), math.comb(1000, 500))), rel=1e-10)


# ----------------------------------------------------------------------------- registry


def test_parametrised_names_for_any_k() -> None:
    for name, cls, k in [("pass@5", PassAtK, 5), ("pass^16", PassHatK, 16), ("unbiased_pass@3", UnbiasedPassAtK, 3),
                         ("unbiased_pass^1000", UnbiasedPassHatK, 1000)]:  # fmt: skip
        metric = get_reducer(name)
        assert isinstance(metric, cls)
        assert (metric.name, metric.k) == (name, k)  # type: ignore[attr-defined]
        assert type(metric).name == name  # a ClassVar: the instance carries no configuration
        assert metric.higher_is_better is True
    assert type(get_reducer("pass@5")) is type(get_reducer("pass@5"))


@pytest.mark.parametrize("name", ["nope", "pass@0", "pass@05", "pass@k", "pass@-1", "pass@2x", "Pass@2", "mean_reward "])
def test_unknown_names_list_the_known_ones(name: str) -> None:
    with pytest.raises(NotFoundError) as err:
        get_reducer(name)
    message = str(err.value)
    assert repr(name) in message
    for known in ("mean_reward", "avg", "pass_rate", "pass@{k}", "pass^{k}", "unbiased_pass@{k}", "unbiased_pass^{k}"):
        assert known in message


def test_register_a_metric_and_a_family(clean_registry: None) -> None:
    @register_reducer("worst_task")
    class WorstTask(MeanOverTasks):
        higher_is_better = True

        def task_scores(self, rewards: TaskRewards) -> tuple[np.ndarray, np.ndarray]:
            return rewards.sum_per_task(rewards.values), rewards.lengths > 0

    @register_reducer("top{k}_share")
    class TopKShare(Reducer):
        k: ClassVar[int]

        def compute(self, task_rewards: Sequence[Sequence[float]]) -> float:
            return sum(sum(sorted(t)[-self.k :]) for t in task_rewards) / max(1, sum(map(len, task_rewards)))

    assert value("worst_task", V1) == 2.0
    assert get_reducer("top3_share").compute([[1, 2, 3, 4]]) == 9 / 4
    assert "worst_task" in reducer_names() and "top{k}_share" in reducer_names()
    # the generic summarize: a seeded bootstrap that recomputes the metric on resampled tasks
    a = get_reducer("top1_share").summarize(V1 * 5)
    b = get_reducer("top1_share").summarize(V1 * 5)
    assert a == b and a.method == "bootstrap" and a.tasks_used == 15 and a.stderr and a.stderr > 0


def test_register_rejects_non_metrics(clean_registry: None) -> None:
    with pytest.raises(TypeError):
        register_reducer("x")(int)  # type: ignore[type-var]
    with pytest.raises(ValueError, match="registered as"):

        @register_reducer("b")
        class Named(Reducer):
            name = "a"


# ----------------------------------------------------------------------------- uncertainty


def test_mean_reward_t_interval_over_tasks() -> None:
    rng = np.random.default_rng(3)
    tasks = [rng.random(rng.integers(1, 9)).tolist() for _ in range(40)] + [[]]
    result = get_reducer("mean_reward").summarize(tasks)
    means = np.array([np.mean(t) for t in tasks if t])
    se = means.std(ddof=1) / math.sqrt(len(means))
    low, high = scipy.stats.t.interval(0.95, len(means) - 1, loc=means.mean(), scale=se)
    assert result.method == "t" and (result.tasks_used, result.tasks_dropped) == (40, 1)
    assert result.stderr == pytest.approx(se, rel=1e-12)
    assert (result.ci_low, result.ci_high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))


def test_wilson_intervals() -> None:
    none_pass = get_reducer("pass@1").summarize([[0]] * 10)
    assert none_pass.method == "wilson" and none_pass.value == 0.0
    assert none_pass.ci_low == 0.0 and none_pass.ci_high == pytest.approx(0.27753, abs=1e-5)  # never a point at 0/n
    all_pass = get_reducer("pass^1").summarize([[1]] * 10)
    assert all_pass.ci_low == pytest.approx(0.72247, abs=1e-5) and all_pass.ci_high == 1.0
    rate = get_reducer("pass_rate").summarize(V1)  # 6 of 12 samples
    assert rate.ci_low == pytest.approx(0.25378, abs=1e-5) and rate.ci_high == pytest.approx(0.74622, abs=1e-5)
    assert rate.stderr == pytest.approx(math.sqrt(0.25 / 12))


def test_bootstrap_is_seeded_and_sane() -> None:
    rng = np.random.default_rng(7)
    tasks = (rng.random((2000, 8)) < rng.random((2000, 1))).astype(float)
    metric = get_reducer("unbiased_pass@4")
    a, b = metric.summarize(tasks), metric.summarize(tasks)
    assert a == b and a.method == "bootstrap"
    assert metric.summarize(tasks, seed=1) != a
    assert a.ci_low is not None and a.ci_high is not None and a.ci_low < a.value < a.ci_high
    scores, used = metric.task_scores(TaskRewards.of(tasks))  # type: ignore[attr-defined]
    analytic = scores[used].std(ddof=1) / math.sqrt(used.sum())
    assert a.stderr == pytest.approx(analytic, rel=0.1)


def test_bootstrap_with_many_distinct_values_resamples_tasks() -> None:
    from gym_metrics.reducers._uncertainty import bootstrap_mean

    x = np.random.default_rng(1).random(3000)  # every value distinct: the index-resampling path
    result = bootstrap_mean(x, seed=0, resamples=500)
    assert result.stderr == pytest.approx(x.std(ddof=1) / math.sqrt(len(x)), rel=0.1)
    assert bootstrap_mean(x, seed=0, resamples=500) == result


def test_summarize_metrics_keys() -> None:
    out = summarize_reducers(["pass@2", "unbiased_pass@8", "pass@2"], V1)
    assert list(out) == [
        "pass@2", "pass@2/stderr", "pass@2/ci_low_95", "pass@2/ci_high_95", "pass@2/tasks_used", "pass@2/tasks_dropped",
        "unbiased_pass@8", "unbiased_pass@8/tasks_used", "unbiased_pass@8/tasks_dropped",
    ]  # fmt: skip
    assert out["pass@2"] == float(Fraction(2, 3))
    assert (out["unbiased_pass@8"], out["unbiased_pass@8/tasks_dropped"]) == (0.0, 3)


def _counts(name: str, tasks: object) -> tuple[int, int]:
    result = get_reducer(name).summarize(tasks)  # type: ignore[arg-type]
    return result.tasks_used, result.tasks_dropped


def test_text_rewards_are_refused_naming_the_first() -> None:
    """numpy parsed "1.0" (and b"1") into a passing sample while "x" was refused: text is no
    reward, whatever it spells (None is a missing sample, left out)."""
    from gym_metrics.reducers import summarize_reducers

    for text in ("1.0", b"1"):
        with pytest.raises(InvalidInputError, match=r"task_rewards\[0\]\[0\]: not a number"):
            summarize_reducers(["mean_reward"], [[text, 0.0], [1.0, 1.0]])  # type: ignore[list-item]
    summary = summarize_reducers(["mean_reward", "pass_rate"], [[None, 0.0], [1.0, 1.0]])  # type: ignore[list-item]
    assert (summary["mean_reward"], summary["pass_rate"]) == (0.5, 2 / 3)
