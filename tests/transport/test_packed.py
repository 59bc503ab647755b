"""Packed double fields merged from numpy bytes leave a message exactly as `extend` would."""

from __future__ import annotations

import numpy as np
import pytest

from gym_metrics._transport._packed import add_doubles
from gym_metrics.v1 import resources_pb2 as pb

VALUES = [
    np.array([]),
    np.array([1.0, -0.0, 0.0, np.nan, np.inf, -np.inf, 5e-324, 1.7976931348623157e308, 0.1]),
    np.random.default_rng(0).normal(size=2000),
    np.arange(10, dtype=np.int64),  # converted to doubles, as extend(tolist()) of ints would be
    np.arange(20.0)[::3],  # not contiguous
]


@pytest.mark.parametrize("values", VALUES, ids=["empty", "special", "normal", "ints", "strided"])
def test_add_doubles_equals_extend(values: np.ndarray) -> None:
    a, b = pb.NumericColumn(kind=pb.VALUE_KIND_INT), pb.NumericColumn(kind=pb.VALUE_KIND_INT)
    a.values.extend([1.5])
    b.values.extend([1.5])  # appends after what is there
    a.values.extend(values.astype(np.float64).tolist())
    add_doubles(b, "values", values)
    assert a.SerializeToString() == b.SerializeToString()
    assert np.array_equal(np.array(a.values), np.array(b.values), equal_nan=True)


def test_add_doubles_into_map_entries_and_fields_not_numbered_one() -> None:
    a, b = pb.GroupLevelMetrics(), pb.GroupLevelMetrics()
    values = np.array([0.5, 2.0, np.nan])
    a.stats["mean/reward"].values.extend(values.tolist())
    add_doubles(b.stats["mean/reward"], "values", values)
    a.reward_profile_completion_pct.extend([100.0, 50.0])
    add_doubles(b, "reward_profile_completion_pct", np.array([100.0, 50.0]))
    a.task_index.extend([3, 4])
    b.task_index.extend([3, 4])
    assert a.SerializeToString() == b.SerializeToString()
