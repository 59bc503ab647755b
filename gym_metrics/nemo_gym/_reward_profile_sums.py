"""Sums that round the way NeMo Gym's do: CPython >= 3.12's compensated `sum`, vectorised.

NeMo Gym 0.7.0 needs Python >= 3.13, whose built-in `sum` of floats is Neumaier's compensated
summation (the rounding errors are carried in a second accumulator and added once at the end,
unless that accumulator is zero or not finite). Matching it, rather than numpy's pairwise sum,
keeps noise-level results equal: the spread of a score that is the same in every rollout comes
out exactly as NeMo Gym's (0.0 where it gives 0.0).

- `neumaier_prefix` sums along the rollout axis (short) for every task at once, every prefix.
- `python_sum` is the same algorithm for a short Python list.
- `total` sums a long 1-D array (across tasks): `math.fsum` (correctly rounded, which the
  compensated sum equals to within an ulp or so when the sum is well-conditioned), the
  compensated sum itself when it is not (terms cancelling down to under 1/ILL_CONDITIONED of
  their magnitudes, e.g. 1e30, 0.1, -1e30: CPython gives 0.1015625, fsum 0.1), numpy's sum when
  there are non-finite numbers (the compensated sum then gives inf or NaN as numpy's does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

__all__ = ["neumaier_prefix", "python_sum", "total"]

FloatArray = NDArray[np.float64]
# Neumaier's error is about n * u**2 * sum(|x|) beyond fsum's u * |sum|: a condition number
# under 1e4 keeps the two within relative 1e-12 for any task count a run can have.
ILL_CONDITIONED = 1e4


def neumaier_prefix(values: FloatArray) -> FloatArray:
    """Compensated prefix sums along axis 1: `out[:, j]` is `sum(values[:, :j + 1])` as CPython
    computes it. Absent entries must be 0.0 (adding 0.0 leaves both accumulators unchanged)."""
    out = np.empty_like(values)
    partial = np.zeros(values.shape[:1] + values.shape[2:])
    carry = np.zeros_like(partial)
    with np.errstate(invalid="ignore", over="ignore"):
        for j in range(values.shape[1]):
            item = values[:, j]
            new = partial + item
            carry += np.where(np.abs(partial) >= np.abs(item), (partial - new) + item, (item - new) + partial)
            partial = new
            out[:, j] = np.where((carry != 0) & np.isfinite(carry), partial + carry, partial)
    return out


def python_sum(values: Sequence[float]) -> float:
    """CPython >= 3.12's `sum` of floats (Neumaier), for short lists on any Python version."""
    partial = 0.0
    carry = 0.0
    for item in values:
        new = partial + item
        if abs(partial) >= abs(item):
            carry += (partial - new) + item
        else:
            carry += (item - new) + partial
        partial = new
    if carry and math.isfinite(carry):
        partial += carry
    return partial


def total(values: FloatArray) -> float:
    """Sum of a 1-D float array, rounded as the compensated sum rounds it."""
    if values.size == 0:
        return 0.0
    if np.isfinite(values).all():
        items = values.tolist()
        with np.errstate(over="ignore"):
            magnitude = float(np.abs(values).sum())
        try:
            exact = math.fsum(items)
        except OverflowError:
            return python_sum(items)
        if magnitude <= ILL_CONDITIONED * abs(exact):  # false for an infinite magnitude too
            return exact
        return python_sum(items)
    with np.errstate(invalid="ignore", over="ignore"):
        return float(np.sum(values))
