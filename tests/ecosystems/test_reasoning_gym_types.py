"""An entry through JSON and back (`entry_types`): every kind the table names, the compact `*`
paths, keys that need escaping, and marks that do not fit the value; and why it matters (ARC's
scorer on a board read back as lists)."""

from __future__ import annotations

import json
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from _rg_cases import rg, same
from gym_metrics.ecosystems.reasoning_gym import python_types, restore, to_json


def _round_trip(value: Any) -> Any:
    encoded, types = to_json(value)
    return restore(json.loads(json.dumps(encoded)), types)


@pytest.mark.parametrize(
    "value",
    [
        {"a": (1, 2), "b": [(1, 2), (3, 4)], "c": ((1, (2, 3)), (4, (5, 6)))},
        {"grid": tuple(tuple(range(5)) for _ in range(4))},
        {"mixed": [(1, 2), [3, 4], (5,)], "empty": (), "nested_empty": [(), ()]},
        {"by_int": {1: "a", 20: (1, 2)}, "by_str": {"1": "a"}},
        {"f": Fraction(3, 4), "d": Decimal("1.10"), "z": complex(1, -2), "fs": [Fraction(1, 3), Fraction(2, 5)]},
        {"s": {3, 1, 2}, "fz": frozenset({"b", "a"}), "s_of_tuples": {(2, 1), (1, 2)}},
        {"a/b": (1,), "c~d": {"e/f": (2,)}, "*": (3,)},
        {"np": [np.int64(3), np.float64(0.5), np.str_("x"), np.bool_(True)]},
    ],
)
def test_what_json_cannot_hold_comes_back(value: dict[str, Any]) -> None:
    back = _round_trip(value)
    expected = {k: ([v.item() for v in x] if k == "np" else x) for k, x in value.items()}
    assert same(back, expected), (back, expected)


def test_paths_are_compact_and_escaped() -> None:
    assert python_types({"grid": tuple(tuple(range(30)) for _ in range(30))}) == {"grid": "tuple", "grid/*": "tuple"}
    assert python_types({"x": [(1,), [2], (3,)]}) == {"x/0": "tuple", "x/2": "tuple"}
    assert python_types({"a/b": {"c~d": (1,)}}) == {"a~1b/c~0d": "tuple"}
    assert python_types({"plain": [1, "two", {"three": 3.0}], "none": None}) == {}


def test_what_no_kind_holds_is_refused_naming_where() -> None:
    with pytest.raises(TypeError, match=r"/meta/0: a builtins.object does not survive JSON"):
        to_json({"meta": [object()]})
    with pytest.raises(TypeError, match=r"/meta: a key of type tuple"):
        to_json({"meta": {(1, 2): "x"}})


@pytest.mark.parametrize(
    ("value", "types", "message"),
    [
        ({"a": 1}, {"a": "tuple"}, "entry_types: a is int, not tuple"),
        ({"a": {"x": 1}}, {"a": "tuple"}, "entry_types: a is an object, not tuple"),
        ({"a": [1]}, {"a": "int_keys"}, "entry_types: a is a list, not int_keys"),
        ({"a": {"x": 1}}, {"a": "int_keys"}, "entry_types: a has a key that is not an integer"),
        ({"a": 3}, {"a": "fraction"}, "entry_types: a is int, not the text of a fraction"),
        ({"a": 3}, {"a/b": "tuple"}, "entry_types: a is int, not a container"),
        ({"a": {"b": [1, {"c": 2}]}}, {"a/b/1/c": "tuple"}, "entry_types: a/b/1/c is int, not tuple"),
        ({"a": [1]}, {"a": "tensor"}, "entry_types: a is marked 'tensor', no kind of entry_types"),
    ],
)
def test_marks_that_do_not_fit_are_refused_naming_the_path(value: Any, types: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        restore(value, types)


def test_arc_needs_its_tuples_back() -> None:
    """Why rows carry entry_types: ARC's scorer compares its parsed board (tuples) with the
    entry's; read back from JSON as lists, the right answer scores 0.05."""
    dataset = rg().create_dataset("arc_agi", size=1, seed=3)
    entry = dataset[0]
    encoded, types = to_json(entry)
    as_read = json.loads(json.dumps(encoded))
    assert dataset.score_answer(entry["answer"], entry) == 1.0
    assert dataset.score_answer(entry["answer"], as_read) == 0.05
    assert dataset.score_answer(entry["answer"], restore(as_read, types)) == 1.0
