"""One JSON parser (gym_metrics/_util/jsonio.py) for rows, lines and answers: the values Python's json
gives (integers beyond 64 bits exact, NaN / Infinity literals), at orjson's speed otherwise."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from gym_metrics._util.jsonio import loads, orjson_exact
from gym_metrics.rollouts import RowSource, parse_row

BIG = 2**64 + 1


@pytest.mark.parametrize("as_text", [False, True])
def test_values_are_pythons(as_text: bool) -> None:
    text = json.dumps({"big": BIG, "neg": -(2**70), "ok": 2**63 - 1, "f": 0.1, "s": "0" * 30})
    raw = text if as_text else text.encode()
    assert loads(raw) == json.loads(text) and type(loads(raw)["big"]) is int
    assert math.isnan(loads(b'{"x": NaN}')["x"]) and loads("[Infinity]") == [math.inf]


def test_errors_are_value_errors() -> None:
    for bad in (b"{", b"\xff", b"[" * 100_000, "nope"):
        with pytest.raises(ValueError):
            loads(bad)


def test_orjson_exact_only_without_long_digit_runs() -> None:
    assert orjson_exact(b'{"a": 123456789012345678}') and not orjson_exact(b'{"a": 1234567890123456789}')


def test_rows_keep_big_integers_one_by_one_and_in_bulk() -> None:
    lines = [json.dumps({"i": i, "id": BIG + i}).encode() for i in range(3)]
    assert parse_row(lines[0])["id"] == BIG
    source = RowSource(lines)
    assert [row["id"] for row in source.load([0, 1, 2])] == [BIG, BIG + 1, BIG + 2]  # type: ignore[index]
    assert [row["id"] for row in RowSource([x.decode() for x in lines]).load(np.arange(3).tolist())] == [BIG, BIG + 1, BIG + 2]  # type: ignore[index]
