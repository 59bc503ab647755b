"""Columns of texts and the byte templates they fill: the output file's bulk is made here.

A `Texts` is one buffer and where each row's text lies in it, so a column of a million JSON
numbers is one orjson call and two numpy arrays, not a million bytes objects. `fill` lays a
template's pieces and the columns' texts out row after row: in C (`_fill.c`, built on install)
or, where it could not be built, with the same bytes in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import orjson

_native: Callable[..., bytes] | None
"""The C fill, or None: the Python one is used (tests switch it off to compare the two)."""
try:
    from gym_metrics.aggregate.render._fill import fill as _native
except ImportError:  # no C compiler at install time (pyproject: the extension is optional)
    _native = None


@dataclass(frozen=True)
class Texts:
    """Row i's text is buf[starts[i]:ends[i]] (int64 positions; a row may be empty)."""

    buf: bytes
    starts: np.ndarray
    ends: np.ndarray
    _origin: tuple[Texts, np.ndarray] | None = field(default=None, repr=False, compare=False)
    """(texts, rows) this was taken from: tolist() then shares one object per distinct text."""
    _array: bool = field(default=False, repr=False, compare=False)
    """buf is a JSON array of these texts (tolist() is one split)."""

    def __len__(self) -> int:
        return len(self.starts)

    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    def take(self, rows: np.ndarray) -> Texts:
        """The texts of `rows`, in that order (the buffer is shared, not copied)."""
        origin = (self, rows) if self._origin is None else (self._origin[0], self._origin[1][rows])
        return Texts(self.buf, self.starts[rows], self.ends[rows], origin)

    def tolist(self) -> list[bytes]:
        """The texts as bytes objects (the Python fill's input)."""
        if self._origin is not None:
            base, rows = self._origin
            table = np.array([*base.tolist(), b""], dtype=object)  # (b"": never a 2-d array)
            return cast(list[bytes], table[rows].tolist())
        if self._array and len(self):
            return self.buf[1:-1].split(b",")
        return [self.buf[a:b] for a, b in zip(self.starts.tolist(), self.ends.tolist())]


def numbers(values: np.ndarray) -> Texts:
    """Each value as orjson writes it (ints as ints, floats shortest round-trip), rendered in
    one call; a JSON array of numbers holds no comma but its separators. Integers of a
    narrow range (indices, counts) are rendered once per value and looked up."""
    if len(values) >= 64 and values.dtype.kind in "iu":
        low, high = int(values.min()), int(values.max())
        if high - low < len(values) // 2:
            return numbers(np.arange(low, high + 1, dtype=np.int64)).take(values - low)
    elif len(values) >= 64 and values.dtype == np.float64:  # few values (0/1 rewards, their stats)
        bits = values.view(np.int64)  # compared as bits: -0.0 is not 0.0
        seen = np.unique(bits[:64])
        if len(seen) <= 16:
            at = np.searchsorted(seen, bits).clip(max=len(seen) - 1)
            if (seen[at] == bits).all():
                return numbers(seen.view(np.float64)).take(at)
    buf = orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)
    if len(values) == 0:
        return Texts(buf, np.zeros(0, np.int64), np.zeros(0, np.int64))
    commas = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == ord(","))
    starts = np.concatenate(([1], commas + 1)).astype(np.int64)
    ends = np.concatenate((commas, [len(buf) - 1])).astype(np.int64)
    return Texts(buf, starts, ends, _array=True)


def joined(items: Sequence[bytes]) -> Texts:
    """A list of texts as one column (one join; each text anything, commas included)."""
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    ends = np.cumsum(lengths)
    return Texts(b"".join(items), ends - lengths, ends)


def choice(options: Sequence[bytes], which: np.ndarray) -> Texts:
    """Row i's text is options[which[i]]: a separator or an optional part chosen per row."""
    return joined(options).take(which)


def fill(pieces: Sequence[bytes], columns: Sequence[Texts], rows: int) -> bytes:
    """Row after row, pieces[0] + columns[0][i] + pieces[1] + ... + pieces[-1] (one more piece
    than columns), nothing between rows."""
    if len(pieces) != len(columns) + 1:
        raise ValueError(f"{len(columns)} columns need {len(columns) + 1} pieces, not {len(pieces)}")
    if _native is not None:
        columns_c = [(c.buf, np.ascontiguousarray(c.starts), np.ascontiguousarray(c.ends)) for c in columns]
        return _native(pieces, columns_c, rows)
    template = b"%b".join(p.replace(b"%", b"%%") for p in pieces)
    if not columns:
        return template * rows
    return b"".join(map(template.__mod__, zip(*(c.tolist() for c in columns))))


def offsets(pieces: Sequence[bytes], columns: Sequence[Texts], rows: int) -> np.ndarray:
    """Where each row of `fill(pieces, columns, rows)` starts (rows + 1 positions)."""
    lengths = np.full(rows, sum(map(len, pieces)), dtype=np.int64)
    for c in columns:
        lengths += c.lengths()
    return np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)


__all__ = ["Texts", "choice", "fill", "joined", "numbers", "offsets"]
