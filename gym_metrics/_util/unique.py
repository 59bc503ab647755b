"""Distinct values of an array by sorting, never by hashing.

numpy >= 2.3 answers `np.unique` for integers with a hash table: at 10M distinct task indices
it takes 11.7 s where a sort takes 0.7 s (numpy 2.4.6 on this project's machine). Task indices
here are usually already sorted (rows are sorted by task, files are written in order), so a
linear check comes first and the sort is skipped.
"""

from __future__ import annotations

import numpy as np


def unique(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values of `values` (as `np.unique`)."""
    s = _sorted(np.asarray(values))
    return s[_starts(s)] if len(s) else s


def unique_counts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sorted distinct values, how often each occurs), as `np.unique(..., return_counts=True)`."""
    s = _sorted(np.asarray(values))
    if not len(s):
        return s, np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(_starts(s))
    return s[starts], np.diff(np.append(starts, len(s)))


def count_distinct(values: np.ndarray) -> int:
    s = _sorted(np.asarray(values))
    return int(np.count_nonzero(_starts(s))) if len(s) else 0


def _sorted(a: np.ndarray) -> np.ndarray:
    if len(a) < 2 or not np.all(a[1:] >= a[:-1]):  # NaN compares False: it goes to the sort
        a = np.sort(a)
    return a


def _starts(s: np.ndarray) -> np.ndarray:
    """True where a run of equal values starts (NaNs, sorted last, count as one value)."""
    first = np.empty(len(s), dtype=bool)
    first[:1] = True
    np.not_equal(s[1:], s[:-1], out=first[1:])
    if s.dtype.kind == "f" and len(s) > 1:
        nan = np.isnan(s)
        first[1:] &= ~(nan[1:] & nan[:-1])
    return first


__all__ = ["count_distinct", "unique", "unique_counts"]
