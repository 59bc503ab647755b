"""The result an SDK run or job returns, in NeMo Evaluator's shape: `aggregate_scores.scores`
as objects (`.name`, `.mean`, `.count`, ...), `row_scores`, `to_dict()`.

Built from the document `gym-metrics evaluate` writes (local runs) or a job server returns
(durable jobs), so both paths give the same object. Score names follow the metric's NeMo
names where they differ (`nv_accuracy`, `topic_adherence(mode=f1)`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gym_metrics.evaluation import Histogram, HistogramBin, Percentiles, ScoreStats


def _stats(data: Mapping[str, Any]) -> ScoreStats:
    """A ScoreStats from its JSON form (ScoreStats.to_dict's)."""
    percentiles = data.get("percentiles")
    bins = (data.get("histogram") or {}).get("bins") or []
    return ScoreStats(
        name=data["name"],
        count=int(data.get("count", 0)),
        nan_count=int(data.get("nan_count", 0)),
        sum=data.get("sum"),
        mean=data.get("mean"),
        min=data.get("min"),
        max=data.get("max"),
        std_dev=data.get("std_dev"),
        variance=data.get("variance"),
        score_type=data.get("score_type", "range"),
        percentiles=None if percentiles is None else Percentiles(**percentiles),
        histogram=Histogram(tuple(HistogramBin(**b) for b in bins)),
    )


class AggregateScores:
    """`.scores`: one ScoreStats per score (iterable too); printed as JSON."""

    def __init__(self, scores: list[ScoreStats]) -> None:
        self.scores = scores

    def __iter__(self) -> Iterator[ScoreStats]:
        return iter(self.scores)

    def __len__(self) -> int:
        return len(self.scores)

    def __getitem__(self, name: str) -> ScoreStats:
        """The score named `name` (KeyError listing the names when absent)."""
        for score in self.scores:
            if score.name == name:
                return score
        raise KeyError(f"no score {name!r}; scores: {', '.join(s.name for s in self.scores)}")

    def to_dict(self) -> dict[str, Any]:
        return {"aggregate_scores": [s.to_dict() for s in self.scores]}

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def __repr__(self) -> str:
        return f"AggregateScores({[s.name for s in self.scores]})"


@dataclass(frozen=True)
class RowScore:
    """One row's scores (None where it has none), its error and what was generated for it."""

    index: int
    scores: dict[str, float | None]
    error: dict[str, str] | None = None
    generated: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"index": self.index, "scores": self.scores}
        if self.generated is not None:
            out["generated"] = self.generated
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True)
class EvaluationResult:
    """What `Evaluator.run` and `Job.get_result` return."""

    aggregate_scores: AggregateScores
    row_scores: list[RowScore] = field(default_factory=list)

    @classmethod
    def from_document(cls, document: Mapping[str, Any], names: Mapping[str, str] | None = None) -> EvaluationResult:
        """From `{"aggregate_scores": [...], "row_scores": [...]}`; `names` (gym-metrics name
        -> reported name) renames scores and leaves out the ones it does not list."""
        aggregates = [_stats(_renamed_stat(s, names)) for s in document.get("aggregate_scores", []) if _kept(s["name"], names)]
        rows = [
            RowScore(
                index=int(r["index"]),
                scores={_name(k, names): v for k, v in (r.get("scores") or {}).items() if _kept(k, names)},
                error=r.get("error"),
                generated=r.get("generated"),
            )
            for r in document.get("row_scores", [])
        ]
        return cls(AggregateScores(aggregates), rows)

    def to_dict(self) -> dict[str, Any]:
        """The document `gym-metrics evaluate` writes (JSON-ready, no NaN)."""
        return {"aggregate_scores": self.aggregate_scores.to_dict()["aggregate_scores"], "row_scores": [r.to_dict() for r in self.row_scores]}

    def __str__(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def _kept(name: str, names: Mapping[str, str] | None) -> bool:
    return names is None or name in names


def _name(name: str, names: Mapping[str, str] | None) -> str:
    return name if names is None else names[name]


def _renamed_stat(stat: Mapping[str, Any], names: Mapping[str, str] | None) -> dict[str, Any]:
    return {**stat, "name": _name(stat["name"], names)}


__all__ = ["AggregateScores", "EvaluationResult", "RowScore"]
