"""evaluate(): concurrency, input order, per-row errors, statistics
(docs/metrics.md#scorer-results)."""

from __future__ import annotations

import asyncio
import sys
import json
import math
import random
import statistics
from collections.abc import Mapping
from typing import Any

import numpy as np
import pydantic
import pytest

from gym_metrics.errors import InvalidInputError, NotFoundError
from gym_metrics.evaluation import EvaluationScores, ScoreStats, evaluate, evaluate_async
from gym_metrics.scorers import RowError, Scorer

pytestmark = pytest.mark.every_python  # (see pyproject: what differs between CPython versions)


class Echo(Scorer):
    """Scores the row's `x` (and `y` when present); raises what the row asks for."""

    name = "echo"
    score_names = ("x", "y")
    eager = True  # pure CPU

    def __init__(self) -> None:
        super().__init__()
        self.tasks: set[asyncio.Task[Any] | None] = set()
        self.closed = 0

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        # The Task itself, not its id: a finished eager Task is freed at once and the next row's
        # Task may get its address (on 3.12.1 and 3.13.0 every row's did).
        self.tasks.add(asyncio.current_task())
        if "raise" in row:
            raise row["raise"]
        return {k: row[k] for k in ("x", "y", "undeclared") if k in row}

    async def aclose(self) -> None:
        self.closed += 1


class Slow(Scorer):
    """Sleeps a random time per row and tracks how many rows are in flight."""

    name = "slow"
    score_names = ("x",)

    def __init__(self) -> None:
        super().__init__()
        self.in_flight = self.peak = 0
        self.rng = random.Random(0)

    async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(self.rng.random() * 0.005)
        self.in_flight -= 1
        return {"x": row["x"]}


def test_rows_keep_input_order_when_completing_out_of_order() -> None:
    metric = Slow()
    result = evaluate(metric, ({"x": float(i)} for i in range(200)), parallelism=8)
    assert result.column("x").tolist() == [float(i) for i in range(200)]
    assert [r["index"] for r in result.row_scores] == list(range(200))
    assert metric.peak == 8  # bounded, and actually concurrent


@pytest.mark.parametrize("parallelism", [1, 3])
def test_parallelism_bounds_rows_in_flight(parallelism: int) -> None:
    metric = Slow()
    evaluate(metric, [{"x": 1.0}] * 30, parallelism=parallelism)
    assert metric.peak == parallelism


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12+ uses real eager Tasks (one per row, run at once)")
def test_cpu_only_metric_runs_without_a_task_per_row() -> None:
    metric = Echo()
    evaluate(metric, [{"x": 1.0}] * 50)
    assert len(metric.tasks) == 1  # every row ran inside evaluate's own task


def test_an_untrusted_metric_gets_a_task_per_row() -> None:
    class Untrusted(Echo):
        eager = False

    metric = Untrusted()
    evaluate(metric, [{"x": 1.0}] * 20)
    assert len(metric.tasks) == 20 and None not in metric.tasks  # a task per row: cancel scopes need it


def test_failed_rows_are_recorded_and_never_abort() -> None:
    rows: list[Any] = [
        {"x": 1.0, "y": 2.0},
        {"raise": RowError("user_input[2].content", "must be a string, got null")},
        {"raise": KeyError("boom")},
        RowError("json", "line 4: not valid JSON"),
        ["not", "a", "mapping"],
        {"x": "high"},  # not a number
        {"x": 3.0},  # y missing: NaN, not an error
        {"x": math.inf, "y": 1.0},  # non-finite: NaN
        {"x": 5.0, "y": 4.0, "undeclared": 9.0},  # undeclared names are ignored
    ]
    result = evaluate(Echo(), rows)
    assert len(result) == 9
    x = result.column("x").tolist()
    assert x[0] == 1.0 and x[6] == 3.0 and x[8] == 5.0
    assert all(math.isnan(v) for v in x[1:6] + [x[7]])
    errors = {i: (f.field, f.reason) for i, f in result.errors.items()}
    assert errors == {
        1: ("user_input[2].content", "must be a string, got null"),
        2: ("row", "KeyError: 'boom'"),
        3: ("json", "line 4: not valid JSON"),
        4: ("row", "must be an object, got list"),
        5: ("scores.x", "not a number: 'high'"),
    }
    rows_out = result.row_scores
    assert rows_out[1] == {
        "index": 1,
        "scores": {"x": None, "y": None},
        "error": {"field": "user_input[2].content", "reason": "must be a string, got null"},
    }
    assert rows_out[6] == {"index": 6, "scores": {"x": 3.0, "y": None}}
    by_name = {s["name"]: s for s in result.aggregate_scores}
    assert (by_name["x"]["count"], by_name["x"]["nan_count"]) == (3, 6)
    assert (by_name["y"]["count"], by_name["y"]["nan_count"]) == (3, 6)


def test_statistics_use_the_population_variance() -> None:
    values = [0.0, 1.0, 0.5, 0.25, 1.0]
    result = evaluate(Echo(), [{"x": v} for v in values] + [{"raise": RowError("f", "r")}])
    x = next(s for s in result.aggregate_scores if s["name"] == "x")
    assert {k: v for k, v in x.items() if k not in ("percentiles", "histogram")} == {
        "name": "x",
        "count": 5,
        "nan_count": 1,
        "sum": 2.75,
        "mean": 2.75 / 5,
        "min": 0.0,
        "max": 1.0,
        "std_dev": pytest.approx(statistics.pstdev(values), rel=1e-15),
        "variance": pytest.approx(statistics.pvariance(values), rel=1e-15),
        "score_type": "range",
    }
    assert x["percentiles"]["p50"] == 0.5 and sum(b["count"] for b in x["histogram"]["bins"]) == 5


def test_statistics_of_one_and_of_no_value() -> None:
    result = evaluate(Echo(), [{"x": 0.5}])
    x, y = result.aggregate_scores
    assert (x["std_dev"], x["variance"], x["mean"]) == (0.0, 0.0, 0.5)
    assert y == {
        "name": "y",
        "count": 0,
        "nan_count": 1,
        "sum": None,
        "mean": None,
        "min": None,
        "max": None,
        "std_dev": None,
        "variance": None,
        "score_type": "range",
        "percentiles": None,
        "histogram": {"bins": []},
    }


def test_json_is_nan_free_and_matches_spec_shape() -> None:
    result = evaluate(Echo(), [{"x": 1.0}, {"raise": RowError("f", "r")}, {"y": 2.0}])

    def no_constants(name: str) -> None:
        raise AssertionError(f"non-JSON constant {name}")

    doc = json.loads(result.to_json(), parse_constant=no_constants)
    assert set(doc) == {"aggregate_scores", "row_scores"}
    assert [set(s) for s in doc["aggregate_scores"]] == [
        {"name", "count", "nan_count", "sum", "mean", "min", "max", "std_dev", "variance", "score_type",
         "percentiles", "histogram"}
    ] * 2
    assert doc["row_scores"][1]["scores"] == {"x": None, "y": None}


def test_large_dataset_grows_the_matrix_and_keeps_trailing_failures() -> None:
    rows: list[Any] = [{"x": float(i)} for i in range(3000)] + [RowError("json", "bad")] * 1500
    result = evaluate(Echo(), iter(rows))
    assert len(result) == 4500 and len(result.errors) == 1500
    assert result.column("x")[:3000].tolist() == [float(i) for i in range(3000)]
    assert np.isnan(result.column("x")[3000:]).all()


def test_limit_samples() -> None:
    consumed = []

    def rows() -> Any:
        for i in range(100):
            consumed.append(i)
            yield {"x": float(i)}

    result = evaluate(Echo(), rows(), limit_samples=7)
    assert len(result) == 7 and len(consumed) == 7
    assert len(evaluate(Echo(), rows(), limit_samples=0)) == 0


def test_empty_dataset() -> None:
    result = evaluate("tool_call_accuracy", [])
    assert len(result) == 0 and result.row_scores == []
    assert result.aggregate_scores[0]["count"] == 0


def test_metric_by_name_with_config_and_aclose() -> None:
    row = {
        "user_input": [
            {"content": "", "type": "ai", "tool_calls": [{"name": "b", "args": {}}, {"name": "a", "args": {}}]}
        ],
        "reference_tool_calls": [{"name": "a", "args": {}}, {"name": "b", "args": {}}],
    }
    assert evaluate("tool_call_accuracy", [row]).values.tolist() == [[0.0]]
    assert evaluate("tool_call_accuracy", [row], config={"strict_order": False}).values.tolist() == [[1.0]]
    metric = Echo()
    evaluate(metric, [{"x": 1.0}])
    assert metric.closed == 1


def test_bad_arguments() -> None:
    with pytest.raises(NotFoundError, match="unknown scorer 'nope'"):
        evaluate("nope", [])
    with pytest.raises(InvalidInputError) as info:
        evaluate("tool_call_accuracy", [], config={"strict": False})
    assert info.value.violations[0].field == "config.strict"
    with pytest.raises(InvalidInputError, match="parallelism"):
        evaluate(Echo(), [], parallelism=0)
    with pytest.raises(InvalidInputError, match="limit_samples"):
        evaluate(Echo(), [], limit_samples=-1)
    with pytest.raises(InvalidInputError, match="config goes with a scorer.s name"):
        evaluate(Echo(), [], config={"a": 1})
    assert len(evaluate(scorer=Echo(), dataset=[{"x": 1}])) == 1  # the docs' word for it (was `metric=`)


async def test_sync_evaluate_inside_a_running_loop() -> None:
    result = evaluate(Echo(), [{"x": 2.0}])  # e.g. from a notebook cell
    assert result.values.tolist()[0][0] == 2.0
    assert (await evaluate_async(Echo(), [{"x": 3.0}])).values.tolist()[0][0] == 3.0


def test_metric_with_config_model() -> None:
    class Scaled(Scorer):
        name = "scaled"
        score_names = ("v",)

        class Config(pydantic.BaseModel):
            factor: float = 1.0

        async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
            return {"v": row["v"] * self.config.factor}  # type: ignore[attr-defined]

    assert evaluate(Scaled({"factor": 2}), [{"v": 1.5}]).values.tolist() == [[3.0]]


def test_result_helpers() -> None:
    result = EvaluationScores("m", ("a",), np.array([[1.0], [np.nan], [3.0]]))
    (stats,) = result.stats
    assert stats == ScoreStats.of("a", np.array([1.0, np.nan, 3.0]))
    assert (stats.count, stats.nan_count, stats.sum, stats.mean, stats.min, stats.max) == (2, 1, 4.0, 2.0, 1.0, 3.0)
    assert (stats.std_dev, stats.variance) == (1.0, 1.0)  # population: ((1-2)^2 + (3-2)^2) / 2
    assert len(result) == 3


async def test_a_failing_dataset_cancels_rows_in_flight() -> None:
    started: list[int] = []
    cancelled: list[int] = []

    class Waits(Scorer):
        name = "waits"
        score_names = ("x",)
        eager = True  # started at once, so both rows are in flight when the input fails

        async def score(self, row: Mapping[str, Any]) -> dict[str, float]:
            started.append(row["i"])
            try:
                await asyncio.sleep(10)
            finally:
                cancelled.append(row["i"])
            return {"x": 1.0}

    def rows() -> Any:
        yield {"i": 0}
        yield {"i": 1}
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        await evaluate_async(Waits(), rows(), parallelism=4)
    assert started == [0, 1] and sorted(cancelled) == [0, 1]


class _Holding:
    """A RowSink that keeps rows unsaved until the loop asks for their slots back."""

    def __init__(self) -> None:
        self.unsaved: list[int] = []
        self.saved: dict[int, Any] = {}
        self.releases = 0

    @property
    def held(self) -> int:
        return len(self.unsaved)

    def add(self, index: int, scores: Any, failure: Any, generated: Any = None) -> None:
        self.unsaved.append(index)
        self.saved[index] = scores if failure is None else failure

    def release(self) -> None:
        self.releases += 1
        self.unsaved.clear()


@pytest.mark.parametrize("metric_type", [Echo, Slow])
async def test_score_rows_counts_unsaved_rows_against_parallelism(metric_type: type[Scorer]) -> None:
    """Rows scored but not yet released hold their slots: at any moment at most
    `parallelism` rows are in flight or unsaved (what a killed durable job can lose)."""
    from gym_metrics.evaluation import score_rows

    metric, sink, parallelism = metric_type(), _Holding(), 4
    worst = 0
    score = metric.score

    async def watched(row: Mapping[str, Any]) -> Any:
        nonlocal worst
        in_flight = getattr(metric, "in_flight", 0)
        worst = max(worst, in_flight + 1 + sink.held)
        return await score(row)

    metric.score = watched  # type: ignore[method-assign]
    rows = [(i * 3, {"x": i}) for i in range(200)]  # sparse indices, as a resumed job gives
    await score_rows(metric, rows, sink, parallelism=parallelism)
    assert worst == parallelism
    assert sorted(sink.saved) == [i * 3 for i in range(200)]
    assert sink.releases >= 200 // parallelism - 1
