"""Full rows by position without holding them as dicts: lines of a file buffer, JSON text or
dicts, parsed on access (one orjson call per slice when it can)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from gym_metrics._util.jsonio import loads, orjson_exact
from gym_metrics._util.unique import unique


def parse_row(raw: Any) -> dict[str, Any]:
    """A row from a dict or JSON text, read as Python's json reads it (gym_metrics._util.jsonio: the
    NaN / Infinity literals Python writers emit, integers beyond 64 bits exact). Raises
    ValueError (UnicodeDecodeError for bytes not UTF-8)."""
    if isinstance(raw, dict):
        return raw
    row: dict[str, Any] = loads(raw)
    return row


def bad_json_reason(exc: ValueError) -> str:
    """Why a line did not parse, in the words a user can act on."""
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at column {exc.start + 1}); save the file as UTF-8"
    return f"not valid JSON ({exc})"


class RowSource(Sequence[dict[str, Any]]):
    """Full rows by position, parsed on access, so a million rows never live as dicts.

    `items` holds dicts, JSON strings or bytes; `index` (optional) maps positions to items.
    """

    def __init__(self, items: Sequence[Any], index: np.ndarray | None = None) -> None:
        self._items = items
        self._index = index

    def __len__(self) -> int:
        return len(self._items) if self._index is None else len(self._index)

    def raw(self, i: int) -> Any:
        return self._items[i if self._index is None else int(self._index[i])]

    def __getitem__(self, i: int) -> dict[str, Any]:  # type: ignore[override]
        return parse_row(self.raw(i))

    def take(self, idx: np.ndarray) -> RowSource:
        return RowSource(self._items, idx if self._index is None else self._index[idx])

    def keep_only(self, positions: np.ndarray) -> RowSource:
        """The same rows by position, holding only those at `positions` (copied out of their
        buffer, which can then be freed); reading another row is an error (LookupError)."""
        index = np.full(len(self), -1, dtype=np.int32 if len(positions) < 2**31 else np.int64)
        index[positions] = np.arange(len(positions))
        return RowSource(_Kept(self.raws(positions.tolist())), index)

    def kept_positions(self) -> np.ndarray:
        """The positions whose rows can be read (all of them unless `keep_only` dropped some)."""
        if (isinstance(self._items, _Kept) or hasattr(self._items, "raws_at")) and self._index is not None:
            return np.flatnonzero(self._index >= 0)
        return np.arange(len(self), dtype=np.int64)

    def raws(self, positions: Sequence[int]) -> list[Any]:
        """The rows at `positions` as stored (dict, JSON text or bytes), unparsed."""
        if isinstance(self._items, _Chain):
            idx = np.asarray(positions, dtype=np.int64) if self._index is None else self._index[positions]
            return self._items.raws(idx)
        if isinstance(self._items, BufferRows):  # one slice per row, straight from the buffer
            lines = self._items
            idx = np.asarray(positions, dtype=np.int64) if self._index is None else self._index[positions]
            buf = lines.buffer
            return [buf[a:b] for a, b in zip(lines.starts[idx].tolist(), lines.ends[idx].tolist())]
        if isinstance(self._items, _Kept) and self._index is not None:
            idx = self._index[np.asarray(positions, dtype=np.int64)]
            if len(idx) and idx.min() < 0:
                raise LookupError("a row that was not kept was read (RowSource.keep_only)")
            return [self._items.row(i) for i in idx.tolist()]
        if hasattr(self._items, "raws_at"):  # rows read on demand (merged partials)
            idx = np.asarray(positions, dtype=np.int64) if self._index is None else self._index[positions]
            if len(idx) and idx.min() < 0:
                raise LookupError("a row that was not kept was read")
            return list(self._items.raws_at(np.asarray(idx, dtype=np.int64)))
        return [self.raw(p) for p in positions]

    @staticmethod
    def join_kept(parts: Sequence[RowSource]) -> RowSource | None:
        """One source addressing the rows of several `keep_only` sources in order (None unless
        every part is one): a single list and index instead of a chain of parts."""
        if not all(isinstance(p._items, _Kept) and p._index is not None for p in parts):
            return None
        items: _Kept = _Kept()
        indices = []
        for p in parts:
            assert p._index is not None
            indices.append(np.where(p._index >= 0, p._index.astype(np.int64) + len(items), -1))
            items.extend(p._items)
        return RowSource(items, np.concatenate(indices) if indices else np.zeros(0, np.int64))

    def load(self, positions: Sequence[int]) -> list[dict[str, Any] | None]:
        """Parse many rows at once (one orjson call over the joined text when it can); None
        where a row was not sent (an empty string). A bad row raises RowParseError."""
        raws = self.raws(positions)
        if raws and all(isinstance(r, bytes) and r for r in raws):
            joined = b"[" + b",".join(raws) + b"]"
            if orjson_exact(joined):
                try:
                    return orjson.loads(joined)
                except orjson.JSONDecodeError:
                    pass
        if raws and all(isinstance(r, str) and r for r in raws):
            text = "[" + ",".join(raws) + "]"
            if orjson_exact(text.encode("utf-8", "surrogatepass")):
                try:
                    return orjson.loads(text)
                except orjson.JSONDecodeError:
                    pass
        out: list[dict[str, Any] | None] = []
        for p, r in zip(positions, raws):
            if isinstance(r, (bytes, str)) and not r:
                out.append(None)
                continue
            try:
                row = parse_row(r)
            except ValueError as exc:
                raise RowParseError(p, f"is not valid JSON ({exc})") from None
            if not isinstance(row, dict):
                raise RowParseError(p, f"is not a JSON object (got {type(row).__name__})")
            out.append(row if not isinstance(r, dict) else dict(row))
        return out


class _Kept(list[Any]):
    """The rows `RowSource.keep_only` kept; position -1 marks one that was dropped."""

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, int) and i < 0:
            raise LookupError("a row that was not kept was read (RowSource.keep_only)")
        return super().__getitem__(i)

    row = list.__getitem__
    """Item i, for callers that checked i (no -1 test per row)."""


class RowParseError(ValueError):
    """A full row that could not be parsed, at `position` of its RowSource."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"row {position}: {reason}")
        self.position, self.reason = position, reason


class BufferRows(Sequence[bytes]):
    """Lines of an in-memory JSONL buffer, by (start, end) offsets: rows without dicts."""

    def __init__(self, buffer: bytes, starts: np.ndarray, ends: np.ndarray) -> None:
        self.buffer = buffer
        self.starts = starts
        self.ends = ends

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> bytes:  # type: ignore[override]
        return self.buffer[int(self.starts[i]) : int(self.ends[i])]


class _Chain(Sequence[Any]):
    """Raw rows of several RowSources addressed by one global position."""

    def __init__(self, parts: list[RowSource]) -> None:
        self._parts = parts
        self._offsets = np.cumsum([0] + [len(p) for p in parts])

    def __len__(self) -> int:
        return int(self._offsets[-1])

    def __getitem__(self, i: int) -> Any:  # type: ignore[override]
        part = int(np.searchsorted(self._offsets, i, side="right")) - 1
        return self._parts[part].raw(i - int(self._offsets[part]))

    def raws(self, idx: np.ndarray) -> list[Any]:
        """Many rows at once: positions grouped by part, each part read in bulk."""
        part = np.searchsorted(self._offsets, idx, side="right") - 1
        out: list[Any] = [None] * len(idx)
        for p in unique(part).tolist():
            where = np.flatnonzero(part == p)
            local = (idx[where] - self._offsets[p]).tolist()
            for i, raw in zip(where.tolist(), self._parts[p].raws(local)):
                out[i] = raw
        return out
