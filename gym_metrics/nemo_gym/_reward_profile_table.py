"""Named scores of every rollout as padded numpy arrays (task x rollout x score name).

The reward-profile helpers take per-rollout score dicts (`score_fn`'s output); this turns them
into `values` / `present` arrays once, so every pass@k-style statistic after it is array work.
A score a rollout's dict lacks, and the padding after a short task's last rollout, are absent
(`present` False, value 0.0).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["ScoreTable", "answer_codes"]

NUMBER_KINDS = "biuf"


@dataclass(frozen=True)
class ScoreTable:
    """Scores by (task, rollout position, score name); `lengths[t]` is task t's rollout count."""

    names: list[str]
    values: NDArray[np.float64]
    present: NDArray[np.bool_]
    lengths: NDArray[np.int64]
    invalid: NDArray[np.bool_] | None = None  # present values that are not numbers (non-strict build)

    @property
    def width(self) -> int:
        """Rollout positions held (the longest task's length)."""
        return int(self.values.shape[1])

    @classmethod
    def build(cls, score_dicts: Sequence[Sequence[Mapping[str, Any]]], names: Sequence[str], strict: bool = True) -> ScoreTable:
        """Arrays for `names` from `score_dicts[task][rollout]`; a present value that is not a
        number raises TypeError (NeMo Gym's `sum` of it does), or with `strict=False` is kept
        present (value 0.0) and marked in `invalid`, for callers whose NeMo Gym counterpart
        sums only some of the values."""
        lengths = np.fromiter((len(task) for task in score_dicts), dtype=np.int64, count=len(score_dicts))
        width = int(lengths.max()) if lengths.size else 0
        flat = [scores for task in score_dicts for scores in task]
        rows = np.repeat(np.arange(lengths.size), lengths)
        starts = np.cumsum(lengths) - lengths
        cols = np.arange(len(flat)) - np.repeat(starts, lengths)
        values = np.zeros((lengths.size, width, len(names)))
        present = np.zeros((lengths.size, width, len(names)), dtype=bool)
        invalid = None
        for n, name in enumerate(names):
            mask = np.fromiter((name in scores for scores in flat), dtype=bool, count=len(flat))
            raw = [scores.get(name, 0) for scores in flat]
            column = np.asarray(raw)
            if column.size and column.dtype.kind not in NUMBER_KINDS:
                numeric = [_is_number(v) for v in raw]
                if strict:
                    bad = raw[numeric.index(False)]
                    raise TypeError(f"score {name!r} has a value that is not a number: {bad!r}")
                if invalid is None:
                    invalid = np.zeros_like(present)
                invalid[rows, cols, n] = np.logical_not(numeric)
                column = np.asarray([v if ok else 0 for v, ok in zip(raw, numeric)])
            values[rows, cols, n] = column.astype(np.float64)
            present[rows, cols, n] = mask
        return cls(list(names), values, present, lengths, invalid)


def _is_number(value: Any) -> bool:
    return np.asarray(value).dtype.kind in NUMBER_KINDS


def answer_codes(answers: Sequence[Sequence[Hashable | None]], width: int) -> NDArray[np.int64]:
    """One integer per distinct answer (Python equality, as `collections.Counter` counts), -1
    for None and for padding; an unhashable answer raises TypeError as Counter does."""
    codes = np.full((len(answers), width), -1, dtype=np.int64)
    seen: dict[Any, int] = {}
    for t, task in enumerate(answers):
        for j, answer in enumerate(task):
            if answer is not None:
                codes[t, j] = seen.setdefault(answer, len(seen))
    return codes
