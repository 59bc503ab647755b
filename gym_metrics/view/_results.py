"""An evaluation's result as the viewer shows it: `evaluate`'s (or a durable job's)
`<stem>_<scorer>_results.json` (docs/metrics.md#scorer-results): its aggregate scores, and its
rows' scores in a numpy matrix a filter pages through, each row beside the input row it scored
when the input file is found next to the result."""

from __future__ import annotations

import math
import mmap
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.view._query import MAX_PAGE, preview
from gym_metrics.view._rollout import deep, plain

RESULTS_SUFFIX = "_results.json"
MAX_RESULTS_BYTES = 1 << 30


@dataclass(frozen=True)
class _Loaded:
    mtime: float
    names: tuple[str, ...]
    aggregate: list[dict[str, Any]]
    scores: np.ndarray
    """rows x scores, NaN where a row has no score."""
    failed: np.ndarray
    entries: list[Any]
    input_starts: np.ndarray | None
    """Line starts of the input file's non-blank lines (row i is the i-th), if found."""


def input_beside(path: Path) -> Path | None:
    """`rows_my_scorer_results.json` -> `rows.jsonl`, the longest stem that is a file beside it."""
    stem = path.name[: -len(RESULTS_SUFFIX)]
    cuts = [i for i, ch in enumerate(stem) if ch == "_"]
    for cut in sorted(cuts, reverse=True):
        found = path.with_name(stem[:cut] + ".jsonl")
        if found.is_file():
            return found
    return None


class ResultsFile:
    """A scorer results file, read again when it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.input = input_beside(path)
        self._loaded: _Loaded | None = None
        self._lock = threading.Lock()

    def load(self) -> _Loaded:
        with self._lock:
            mtime = self.path.stat().st_mtime
            if self._loaded is None or self._loaded.mtime != mtime:
                self._loaded = self._read(mtime)
            return self._loaded

    def _read(self, mtime: float) -> _Loaded:
        if self.path.stat().st_size > MAX_RESULTS_BYTES:
            raise InvalidInputError(f"{self.path.name} is over {MAX_RESULTS_BYTES >> 20} MB: not read")
        try:
            doc = orjson.loads(self.path.read_bytes())
            aggregate, entries = doc["aggregate_scores"], doc["row_scores"]
            for key, value in (("aggregate_scores", aggregate), ("row_scores", entries)):
                if not isinstance(value, list):  # a string's characters or a dict's keys were taken for rows
                    raise TypeError(f"{key} is {orjson.dumps(value).decode()[:40]}, not a list")
            names = tuple(str(a["name"]) for a in aggregate)
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise InvalidInputError(f"{self.path.name} is not a scorer results file (aggregate_scores, row_scores): {exc}") from None
        scores = np.full((len(entries), len(names)), np.nan)
        for i, entry in enumerate(entries):
            values = entry.get("scores") if isinstance(entry, dict) else None
            for j, name in enumerate(names):
                v = values.get(name) if isinstance(values, dict) else None
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    scores[i, j] = v
        failed = np.array([isinstance(e, dict) and "error" in e for e in entries], bool)
        return _Loaded(mtime, names, aggregate, scores, failed, entries, self._input_starts())

    def _input_starts(self) -> np.ndarray | None:
        if self.input is None or self.input.stat().st_size == 0:
            return None
        with self.input.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            buf = np.frombuffer(mm, dtype=np.uint8)
            starts = np.concatenate([[0], np.flatnonzero(buf == 10) + 1])
            starts = starts[starts < len(buf)]
            text = ~np.isin(buf, np.frombuffer(b" \t\n\r\x0b\x0c", np.uint8))  # what bytes.isspace calls blank
            nonblank = np.add.reduceat(text, starts) > 0 if len(starts) else np.zeros(0, bool)
            del buf, text
        return starts[nonblank]  # blank lines (whitespace only, as evaluate skips them) are not rows

    def summary(self) -> dict[str, Any]:
        d = self.load()
        return {"rows": len(d.entries), "failed": int(d.failed.sum()), "scores": list(d.names), "aggregate_scores": plain(d.aggregate),
                "input_file": self.input.name if self.input else None}  # fmt: skip

    def page(self, params: dict[str, str], offset: int, limit: int) -> dict[str, Any]:
        """Rows whose `score` lies in [min, max] (and that failed, with failed=1), in input order."""
        d = self.load()
        keep = np.ones(len(d.entries), bool)
        score = params.get("score") or None
        if score is not None and score not in d.names:
            raise InvalidInputError("bad filter", [FieldViolation("score", f"unknown {score[:40]!r}; known: {', '.join(d.names)}")])
        for bound, op in (("min", np.greater_equal), ("max", np.less_equal)):
            raw = params.get(bound, "")
            if raw:
                try:
                    value = float(raw)
                except ValueError:
                    raise InvalidInputError("bad filter", [FieldViolation(bound, f"not a number: {raw[:40]!r}")]) from None
                if score is None:
                    raise InvalidInputError("bad filter", [FieldViolation(bound, "needs score=NAME")])
                keep &= op(d.scores[:, d.names.index(score)], value)
        if params.get("failed") in ("1", "0"):
            keep &= d.failed == (params["failed"] == "1")
        if limit < 1 or limit > MAX_PAGE or offset < 0:
            raise InvalidInputError("bad page", [FieldViolation("limit" if offset >= 0 else "offset", f"limit 1..{MAX_PAGE}, offset >= 0")])
        kept = np.flatnonzero(keep)
        rows = []
        for i in kept[offset : offset + limit].tolist():
            rows.append({"index": i, "scores": {n: _num(v) for n, v in zip(d.names, d.scores[i])},
                         "error": d.entries[i].get("error") if d.failed[i] else None, "preview": preview(self._input(d, i) or b"")})  # fmt: skip
        return {"total": int(len(kept)), "rows": rows, "next": offset + limit if offset + limit < len(kept) else None}

    def row(self, i: int) -> dict[str, Any]:
        d = self.load()
        if not 0 <= i < len(d.entries):
            raise LookupError(f"no row {i} in {self.path.name} ({len(d.entries)} rows)")
        raw = self._input(d, i)
        try:
            row = plain(orjson.loads(raw)) if raw is not None and not deep(raw) else None
        except orjson.JSONDecodeError:
            row = None
        if row is None and raw is not None:  # not JSON, or nested past what the answer can write: its text
            row = raw.decode("utf-8", "replace")
        return {"index": i, "entry": plain(d.entries[i]), "input": row, "input_file": self.input.name if self.input else None,
                "previous": i - 1 if i > 0 else None, "next": i + 1 if i + 1 < len(d.entries) else None}  # fmt: skip

    def _input(self, d: _Loaded, i: int) -> bytes | None:
        if d.input_starts is None or self.input is None or i >= len(d.input_starts):
            return None
        with self.input.open("rb") as f:
            f.seek(int(d.input_starts[i]))
            return f.readline()


def _num(v: float) -> float | None:
    return None if math.isnan(v) else float(v)
