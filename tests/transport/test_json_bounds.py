"""The counts behind the JSON bounds (gym_metrics/_util/jsonbounds.py): exact for text and bytes,
the same whole or in slices, and each refusal names its field, row and bound."""

from __future__ import annotations

import asyncio

import orjson
import pytest

import _ci

from gym_metrics._util import jsonbounds
from gym_metrics._util.jsonbounds import MAX_JSON_CONTAINERS, MAX_JSON_VALUES, JsonBounds, check_items, checked_items, parse_bounded
from gym_metrics.errors import InvalidInputError


def objects(n: int) -> bytes:
    return b"[" + b"{}," * (n - 2) + b"{}]"  # n - 1 objects and the list: n containers


@pytest.mark.parametrize("kind", [bytes, str])
def test_the_bounds_are_exact_at_their_edge(kind: type) -> None:
    at, past = objects(MAX_JSON_CONTAINERS), objects(MAX_JSON_CONTAINERS + 1)
    as_kind = (lambda b: b) if kind is bytes else bytes.decode
    check_items(as_kind(at), "f")
    with pytest.raises(InvalidInputError, match="100,001 objects and lists; at most 100,000") as caught:
        check_items(as_kind(past), "groups[3].row_json", row=7)
    violation = caught.value.violations[0]
    assert (violation.field, violation.row) == ("groups[3].row_json", 7) and "MAX_JSON_CONTAINERS" in violation.description
    numbers = b"[" + b"1," * (MAX_JSON_VALUES + 1) + b"1]"  # one comma more than the bound
    with pytest.raises(InvalidInputError, match="MAX_JSON_VALUES"):
        check_items(as_kind(numbers), "f")
    check_items(as_kind(numbers[3:].replace(b"1,1]", b"1]", 1)), "f") if False else None


def test_slices_count_what_the_whole_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sliced counting (a turn of the loop between slices) adds up to the whole, whatever the
    slice size cuts through."""
    text = orjson.dumps({"a": [{"b": [1, 2, {"c": "x,{["}]}] * 60_000})
    monkeypatch.setattr(jsonbounds, "_SLICE", 4099)
    with pytest.raises(InvalidInputError) as sliced:
        asyncio.run(checked_items(text, "body_json"))
    with pytest.raises(InvalidInputError) as whole:
        check_items(text, "body_json")
    assert str(sliced.value) == str(whole.value) and "180,002 objects" in str(whole.value)  # not the "{[" inside each string


@pytest.mark.parametrize("native", [True, False], ids=["c", "numpy"])
def test_braces_and_commas_in_strings_are_no_items(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A coding episode's answer of 2.6 MB of code holds some 20 containers and 120,000 braces
    in its strings: it was refused as "up to 120,017 objects and lists" (the quick count, an
    upper bound, was the verdict). Past a bound the items are counted again outside strings,
    escaped quotes and backslashes read as JSON reads them."""
    import sys

    if native:
        _ci.need_native(_ci.imported("gym_metrics._util.jsonscan"), "gym_metrics._util.jsonscan")
    else:
        monkeypatch.setitem(sys.modules, "gym_metrics._util.jsonscan", None)
    code = 'def f(x):\n    return {"a": [x, {"b": "\\"}], "c": \'}\'}\n' * 40_000
    text = orjson.dumps({"response": {"output": [{"type": "message", "content": [{"type": "output_text", "text": code}]}]}, "tags": ["x,{", "\\", '"{']})
    check_items(text, "body_json")
    asyncio.run(checked_items(text.decode(), "body_json"))
    assert jsonbounds.exact_counts(text) == (7, 5)
    with pytest.raises(InvalidInputError, match="100,001 objects"):
        check_items(objects(MAX_JSON_CONTAINERS + 1), "f")


def test_wider_bounds_and_a_parse_that_passes() -> None:
    wide = JsonBounds(1_000_000, 4_000_000, ("MAX_BODY_CONTAINERS", "MAX_BODY_VALUES"))
    text = objects(MAX_JSON_CONTAINERS * 2)
    assert len(asyncio.run(parse_bounded(orjson.loads, text, "body", bounds=wide))) == MAX_JSON_CONTAINERS * 2 - 1
    with pytest.raises(InvalidInputError, match="MAX_JSON_CONTAINERS"):
        asyncio.run(parse_bounded(orjson.loads, text, "body"))
