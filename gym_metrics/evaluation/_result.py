"""What `evaluate` returns: per-row scores in one numpy matrix, per-score statistics
(docs/metrics.md#scorer-results).

Scores live in a (rows x scores) float64 matrix with NaN for "no score" (a failed row, or a
metric that could not score); per-row dicts are only built when the result is written out.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics._util.atomic import written_atomically
from gym_metrics._util.jsonio import writable_text
from gym_metrics.errors import GymMetricsError

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RowFailure:
    """Why a row has no scores: the field at fault and the reason."""

    field: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason}


PERCENTILES = (10, 20, 30, 40, 50, 60, 70, 80, 90, 100)
HISTOGRAM_BINS = 10


@dataclass(frozen=True)
class Percentiles:
    """p10 .. p100 of a score, as NeMo Evaluator SDK computes them: rank (p/100)(n+1) - 1 in
    the sorted values, linear between its two neighbours, clamped to the smallest and largest."""

    p10: float
    p20: float
    p30: float
    p40: float
    p50: float
    p60: float
    p70: float
    p80: float
    p90: float
    p100: float

    @classmethod
    def of(cls, ordered: np.ndarray) -> Percentiles:
        n = len(ordered)
        out = []
        for p in PERCENTILES:  # ten scalars, in the SDK's float operations and order
            pos = (p / 100.0) * (n + 1) - 1
            if pos <= 0:
                out.append(float(ordered[0]))
            elif pos >= n - 1:
                out.append(float(ordered[-1]))
            else:
                low = int(pos)
                below, above = float(ordered[low]), float(ordered[low + 1])
                out.append(below + (pos - low) * (above - below))
        return cls(*out)

    def to_dict(self) -> dict[str, float]:
        return {f"p{p}": getattr(self, f"p{p}") for p in PERCENTILES}


@dataclass(frozen=True)
class HistogramBin:
    """Values in [lower_bound, upper_bound); the last bin also holds upper_bound."""

    lower_bound: float
    upper_bound: float
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"lower_bound": self.lower_bound, "upper_bound": self.upper_bound, "count": self.count}


@dataclass(frozen=True)
class Histogram:
    """NeMo Evaluator SDK's histogram: ten equal-width bins from min to max (one bin when all
    values are equal, none when there is no value)."""

    bins: tuple[HistogramBin, ...] = ()

    @classmethod
    def of(cls, ordered: np.ndarray) -> Histogram:
        if not len(ordered):
            return cls()
        low, high = float(ordered[0]), float(ordered[-1])
        if low == high:
            return cls((HistogramBin(low, high, len(ordered)),))
        width = (high - low) / HISTOGRAM_BINS

        def bound(i: int) -> float:  # as the SDK computes them (so bins may not end at max)
            if math.isfinite(width):
                return low + i * width
            t = i / HISTOGRAM_BINS  # a range past the largest float (the SDK stopped before: ScoreStats._huge)
            return low * (1 - t) + high * t

        bins = []
        for i in range(HISTOGRAM_BINS):
            lower, upper = bound(i), bound(i + 1)
            last = i == HISTOGRAM_BINS - 1
            above = int(np.searchsorted(ordered, upper, side="right" if last else "left"))
            bins.append(HistogramBin(lower, upper, above - int(np.searchsorted(ordered, lower, side="left"))))
        return cls(tuple(bins))

    def to_dict(self) -> dict[str, Any]:
        return {"bins": [b.to_dict() for b in self.bins]}


@dataclass(frozen=True)
class ScoreStats:
    """Statistics of one score over the rows, field for field NeMo Evaluator SDK's
    `AggregateRangeScore` (docs/metrics.md#scorer-results).

    `count` counts rows with a (finite) score and `nan_count` the others (failed rows
    included). `sum` adds the values in row order, as the SDK's running sum does (so the last
    bit agrees); `mean` is sum / count. `variance` is the population variance (ddof=0, the
    SDK's: the rows are the whole evaluation set), `std_dev` its square root; both 0.0 for a
    single value. With no value every statistic is None (JSON null), `percentiles` too, and
    the histogram has no bins. `score_type` is always "range" (no row metric here has rubric
    scores).
    """

    name: str
    count: int
    nan_count: int
    sum: float | None
    mean: float | None
    min: float | None
    max: float | None
    std_dev: float | None
    variance: float | None
    score_type: str = "range"
    percentiles: Percentiles | None = None
    histogram: Histogram = field(default_factory=Histogram)

    @classmethod
    def of(cls, name: str, column: np.ndarray) -> ScoreStats:
        values = column[~np.isnan(column)]  # row order kept
        n = int(values.size)
        if n == 0:
            return cls(name, 0, int(column.size), None, None, None, None, None, None)
        with np.errstate(over="ignore"):
            total = float(np.cumsum(values)[-1])  # left to right, as the SDK adds
            huge = np.isinf(values * values)
        if huge.any():  # the SDK raises OverflowError (its running sum of squares): kept here, but said
            return cls._huge(name, column, values, int(np.flatnonzero(~np.isnan(column))[int(np.argmax(huge))]))
        mean = total / n
        with np.errstate(over="ignore"):  # squares a float holds whose sum it does not: infinite, as the SDK's
            variance = float(np.square(values - mean).sum() / n) if n > 1 else 0.0
        return cls._with(name, column, values, total, mean, variance, math.sqrt(variance))

    @classmethod
    def _huge(cls, name: str, column: np.ndarray, values: np.ndarray, row: int) -> ScoreStats:
        """Statistics of values some of whose squares a float cannot hold: each one that can be
        held (the mean and standard deviation by scaled sums), None for the others; a warning
        names the score and the first such row."""
        n = int(values.size)
        with np.errstate(over="ignore"):
            total = float(np.cumsum(values)[-1])
            mean = float(np.sum(values / n))
            scale = float(np.max(np.abs(values - mean)))
            std = scale * math.sqrt(float(np.mean(np.square((values - mean) / scale)))) if scale else 0.0
            variance = std * std
        _log.warning("score %r: the square of row %d's value (%r) is too large for a float: NeMo Evaluator's SDK stops here "
                     "(OverflowError); its statistics a float can hold are written, null for the others", name, row, float(column[row]))  # fmt: skip
        finite = [x if math.isfinite(x) else None for x in (total, mean, variance, std)]
        return cls._with(name, column, values, *finite)

    @classmethod
    def _with(cls, name: str, column: np.ndarray, values: np.ndarray, total: float | None, mean: float | None,
              variance: float | None, std: float | None) -> ScoreStats:  # fmt: skip
        ordered = np.sort(values)
        return cls(
            name=name,
            count=int(values.size),
            nan_count=int(column.size - values.size),
            sum=total,
            mean=mean,
            min=float(ordered[0]),
            max=float(ordered[-1]),
            std_dev=std,
            variance=variance,
            percentiles=Percentiles.of(ordered),
            histogram=Histogram.of(ordered),
        )

    def to_dict(self) -> dict[str, Any]:
        """The SDK's JSON fields, in its order."""
        return {
            "name": self.name,
            "count": self.count,
            "nan_count": self.nan_count,
            "sum": self.sum,
            "mean": self.mean,
            "min": self.min,
            "max": self.max,
            "std_dev": self.std_dev,
            "variance": self.variance,
            "score_type": self.score_type,
            "percentiles": None if self.percentiles is None else self.percentiles.to_dict(),
            "histogram": self.histogram.to_dict(),
        }


@dataclass(frozen=True)
class EvaluationScores:
    """Scores of every row (input order) and their statistics."""

    metric: str
    score_names: tuple[str, ...]
    values: np.ndarray
    """(rows, scores) float64; NaN where a row has no score."""
    errors: Mapping[int, RowFailure] = field(default_factory=dict)
    """Row index -> why that row failed."""
    generated: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)
    """Row index -> what the target generated for it (online evaluation only): the scored
    text, tool calls, usage, latency and attempts."""

    def __len__(self) -> int:
        return int(self.values.shape[0])

    def column(self, name: str) -> np.ndarray:
        """One score over all rows (NaN where missing)."""
        return self.values[:, self.score_names.index(name)]

    @cached_property
    def stats(self) -> list[ScoreStats]:
        return [ScoreStats.of(name, self.values[:, j]) for j, name in enumerate(self.score_names)]

    @property
    def aggregate_scores(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.stats]

    @property
    def row_scores(self) -> list[dict[str, Any]]:
        """`{index, scores: {name: value or None}, generated?: {...}, error?: {field, reason}}` per row."""
        names = self.score_names
        out = []
        for i, row in enumerate(self.values.tolist()):
            entry: dict[str, Any] = {"index": i, "scores": {n: (v if v == v else None) for n, v in zip(names, row)}}
            generated = self.generated.get(i)
            if generated is not None:
                entry["generated"] = generated
            failure = self.errors.get(i)
            if failure is not None:
                entry["error"] = failure.to_dict()
            out.append(entry)
        return out

    def to_dict(self) -> dict[str, Any]:
        """The result document, docs/metrics.md#scorer-results (JSON-ready, no NaN)."""
        return {"aggregate_scores": self.aggregate_scores, "row_scores": self.row_scores}

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2)

    def write_json(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically (temp file + rename): a killed run never leaves half a file."""
        path = Path(path)
        with written_atomically(path) as tmp:
            tmp.write_bytes(self.to_json())
        return path


class ScoreMatrix:
    """Rows' scores written by index into a growing (rows x scores) NaN-filled matrix."""

    held = 0
    """A RowSink that holds nothing unsaved: it is the result."""

    def release(self) -> None:
        pass

    def __init__(self, names: Iterable[str]) -> None:
        self.names = tuple(names)
        if not self.names:
            raise GymMetricsError("the metric declares no score_names")
        self.columns = {name: j for j, name in enumerate(self.names)}
        self.values = np.full((1024, len(self.names)), np.nan)
        self.errors: dict[int, RowFailure] = {}
        self.generated: dict[int, Mapping[str, Any]] = {}

    def add(
        self, index: int, scores: Mapping[str, Any] | None, failure: RowFailure | None, generated: Mapping[str, Any] | None = None
    ) -> None:
        if generated is not None:
            self.generated[index] = writable_text(generated)
        if failure is not None:
            self.errors[index] = RowFailure(*writable_text([failure.field, failure.reason]))
            return
        if not isinstance(scores, Mapping):
            self.errors[index] = RowFailure("scores", f"the metric returned {type(scores).__name__}, not a mapping")
            return
        if index >= len(self.values):
            self._grow(max(2 * len(self.values), index + 1))
        row = self.values[index]
        for name, value in scores.items():
            j = self.columns.get(name)
            if j is None:
                continue  # not a declared score
            try:
                number = float(value)
            except (TypeError, ValueError):
                self.errors[index] = RowFailure(f"scores.{name}", f"not a number: {value!r}")
                row[:] = np.nan
                return
            row[j] = number if math.isfinite(number) else math.nan

    def _grow(self, rows: int) -> None:
        grown = np.full((rows, len(self.names)), np.nan)
        grown[: len(self.values)] = self.values
        self.values = grown

    def result(self, metric: str, n_rows: int) -> EvaluationScores:
        if n_rows > len(self.values):  # trailing rows that all failed
            self._grow(n_rows)
        errors, generated = dict(sorted(self.errors.items())), dict(sorted(self.generated.items()))
        return EvaluationScores(metric, self.names, self.values[:n_rows].copy(), errors, generated)
