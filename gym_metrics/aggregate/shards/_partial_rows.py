"""The row texts of merged partials, read from the partial files when asked for (samples are
made at render time, a chunk of groups at a time) instead of held for the whole merge: at 10M
rollouts that is about 250 MB less. One part's texts are cached at a time (requests come in
row order); a forked render worker opens the files afresh."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from gym_metrics._util.memory import trim_heap
from gym_metrics.errors import FieldViolation, InvalidInputError

if TYPE_CHECKING:  # imported where used: pyarrow.parquet costs ~20 ms of every command's start-up
    import pyarrow.parquet as pq


class PartialRows(Sequence[Any]):
    """Kept row texts numbered 0..n-1 across parts; part k holds the kept rows of rows
    [start, start + rows) of the file `path`."""

    def __init__(self, parts: Sequence[tuple[Path, int, int]], kept_counts: Sequence[int]) -> None:
        self.parts = list(parts)
        self.bounds = np.cumsum([0, *kept_counts])
        self._cache: tuple[int, int, pa.Array] | None = None  # (pid, part, its kept texts)

    def __len__(self) -> int:
        return int(self.bounds[-1])

    def __getitem__(self, i: Any) -> Any:
        if not 0 <= int(i) < len(self):
            raise LookupError("a row that was not kept was read")
        return self.raws_at(np.array([int(i)]))[0]

    def raws_at(self, kept: np.ndarray) -> list[Any]:
        """The texts of kept rows `kept` (numbers from 0), in that order."""
        out: list[Any] = [None] * len(kept)
        part_of = np.searchsorted(self.bounds, kept, side="right") - 1
        for part in np.unique(part_of).tolist():
            where = np.flatnonzero(part_of == part)
            texts = self._texts(part)
            local = pa.array(kept[where] - self.bounds[part], pa.int64())
            for slot, text in zip(where.tolist(), texts.take(local).to_pylist()):
                out[slot] = text
        return out

    def _texts(self, part: int) -> pa.Array:
        cache = self._cache
        if cache is not None and cache[0] == os.getpid() and cache[1] == part:
            return cache[2]
        path, start, rows = self.parts[part]
        self._cache = None
        previous = pa.default_memory_pool()
        pa.set_memory_pool(pa.system_memory_pool())  # the column's scratch goes back to the OS (trim_heap)
        try:
            import pyarrow.parquet as pq
            try:
                texts = _kept_texts(pq.ParquetFile(path, page_checksum_verification=True), start, rows)
            except (OSError, pa.ArrowException) as exc:
                raise InvalidInputError(f"{path}: not a readable partial file: its row texts: {exc}", [FieldViolation("partial", str(path))]) from None
            expected = int(self.bounds[part + 1] - self.bounds[part])
            if len(texts) != expected:
                raise InvalidInputError(f"{path}: not a readable partial file: {len(texts)} row texts where its header says {expected}", [FieldViolation("partial", str(path))])
        finally:
            pa.set_memory_pool(previous)
            trim_heap()
        self._cache = (os.getpid(), part, texts)
        return texts


def _kept_texts(parquet: pq.ParquetFile, start: int, rows: int) -> pa.Array:
    """The non-null texts of rows start..start + rows (one array: `take` from chunks is slow)."""
    chunks = [c.filter(c.is_valid()) for c in row_groups(parquet, "row", start, rows)]
    return pa.concat_arrays([a for c in chunks for a in c.chunks]) if chunks else pa.array([], pa.binary())


def row_groups(parquet: pq.ParquetFile, column: str, start: int, rows: int) -> Iterator[pa.ChunkedArray]:
    """Rows start..start + rows of a column, read a row group at a time (reading the whole
    column at once holds every group's pages besides the values)."""
    at = 0
    for i in range(parquet.metadata.num_row_groups):
        size = parquet.metadata.row_group(i).num_rows
        lo, hi = max(start, at), min(start + rows, at + size)
        if lo < hi:
            yield parquet.read_row_group(i, columns=[column], use_threads=False).column(0).slice(lo - at, hi - lo)
        at += size


__all__ = ["PartialRows", "row_groups"]
