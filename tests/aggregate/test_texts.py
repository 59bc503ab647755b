"""Columns of texts and `fill` (gym_metrics/aggregate/render/_texts.py, _fill.c): the C fill and the
Python one make the same bytes, and bad columns are refused before anything is copied."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from gym_metrics.aggregate import aggregate_file
from gym_metrics.aggregate.render import _texts
from gym_metrics.aggregate.render._texts import Texts, choice, fill, joined, numbers, offsets

from _ci import need_native

NATIVE = _texts._native


@pytest.fixture
def fill_built() -> None:
    need_native(NATIVE, "gym_metrics.aggregate.render._fill (the C fill)")


def test_the_c_fill_is_built_under_ci() -> None:
    """The install builds it (pyproject ext-modules); only a machine without a compiler lacks it."""
    need_native(NATIVE, "gym_metrics.aggregate.render._fill (the C fill; without it the Python fill is used)")


@pytest.mark.parametrize(
    "values",
    [
        np.tile(np.array([0.0, -0.0, 1.0, 0.5]), 300),
        np.repeat(np.arange(-3, 700, dtype=np.int64), 3),
        np.array([2**62, -(2**62)] * 4, dtype=np.int64),
        np.round(np.random.default_rng(1).gamma(2.0, 0.7, 5000), 5),
        np.array([1e300, 5e-324, 1e16, 1e-7, 123456789.125]),
        np.concatenate([np.zeros(600), [1e300, 5e-324]]),  # few values, then others: no lookup
        np.arange(100, dtype=np.uint8) % 3,
        np.array([7.0]),
        np.zeros(0),
    ],
)
def test_numbers_are_orjsons_own(values: np.ndarray) -> None:
    assert numbers(values).tolist() == [orjson.dumps(v, option=orjson.OPT_SERIALIZE_NUMPY) for v in values]


def _case(rng: np.random.Generator, rows: int) -> tuple[list[bytes], list[Texts]]:
    words = [b"", b"a", b"%s", b'{"k":[1,2]}', "\u00e9\u4e2d".encode(), b"%%"]
    columns = [
        numbers(rng.normal(size=rows)),
        joined([words[i] for i in rng.integers(0, len(words), rows)]),
        choice((b",", b"]}", b""), rng.integers(0, 3, rows)),
        numbers(rng.integers(-5, 5, rows)).take(rng.permutation(rows)),
    ]
    pieces = [b"{", b"%", b"", b'":%s', b"}\n"]
    return pieces, columns


@pytest.mark.parametrize("rows", [0, 1, 2, 57])
def test_c_and_python_fill_make_the_same_bytes(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    pieces, columns = _case(np.random.default_rng(rows), rows)
    expected = b"".join(
        pieces[0] + b"".join(t + p for t, p in zip(texts, pieces[1:])) for texts in zip(*(c.tolist() for c in columns))
    )
    made = [fill(pieces, columns, rows)]
    monkeypatch.setattr(_texts, "_native", None)
    made.append(fill(pieces, columns, rows))
    assert made == [expected, expected]
    assert offsets(pieces, columns, rows)[-1] == len(expected)
    assert fill([b"x"], [], 3) == b"xxx"


@pytest.mark.usefixtures("fill_built")
def test_the_c_fill_refuses_bad_columns_before_copying() -> None:
    buf = b"abcdef"
    ok = (buf, np.array([0, 2], np.int64), np.array([1, 6], np.int64))
    assert NATIVE([b"<", b">"], [ok], 2) == b"<a><cdef>"
    bad = {
        "outside its buffer": (buf, np.array([0, 2], np.int64), np.array([1, 7], np.int64)),
        "int64": (buf, np.array([0, 2], np.int32), np.array([1, 6], np.int32)),
        "3 entries": (buf, np.array([0, 2, 3], np.int64), np.array([1, 6, 6], np.int64)),
        "tuple": [buf, ok[1], ok[2]],
    }
    for message, column in bad.items():
        with pytest.raises((ValueError, TypeError), match=message):
            NATIVE([b"<", b">"], [column], 2)
    with pytest.raises(ValueError, match="need 2 pieces"):
        NATIVE([b"<"], [ok], 2)
    with pytest.raises(TypeError, match="piece 1 must be bytes"):
        NATIVE([b"<", ">"], [ok], 2)
    reversed_slice = (buf, np.array([3, 2], np.int64), np.array([1, 6], np.int64))
    with pytest.raises(ValueError, match="column 0"):
        NATIVE([b"<", b">"], [reversed_slice], 2)


def test_a_file_renders_the_same_with_either_fill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Uneven tasks, a 1-rollout task, several fields: the whole metrics file, byte for byte."""
    rows = [
        {"agent_ref": {"name": "a"}, "_ng_task_index": t, "_ng_rollout_index": r, "reward": float((t * r) % 3 == 0),
         "lat%s": 0.1 * t + r, "n": t - r, "ok": r % 2 == 0}
        for t in range(30) for r in range(1 + t % 4)
    ]  # fmt: skip
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    out_c, _, _ = aggregate_file(path, tmp_path / "c.json")
    monkeypatch.setattr(_texts, "_native", None)
    out_py, _, _ = aggregate_file(path, tmp_path / "py.json")
    assert out_c.read_bytes() == out_py.read_bytes()
