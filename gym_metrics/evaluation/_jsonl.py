"""Rows of a JSONL file for evaluate: one JSON object per line, read lazily.

A line that is not a JSON object becomes a RowError (its line number in the reason), so it is
recorded as that row's error instead of stopping the run. Blank lines are skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from gym_metrics._util.jsonio import loads
from gym_metrics.scorers import RowError


def read_rows(
    path: str | Path, on_bad_line: Callable[[int, str], None] | None = None
) -> Iterator[dict[str, Any] | RowError]:
    """Yield each non-blank line's object, or a RowError (field `json`) for a bad line;
    `on_bad_line(line_number, reason)` is told about each bad line as it is read."""
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row: Any = loads(line)  # exactly Python's json: big integers stay exact (tool-call scores)
            except ValueError as exc:
                reason = f"not valid JSON ({exc})"
            else:
                if isinstance(row, dict):
                    yield row
                    continue
                reason = f"not a JSON object (got {type(row).__name__})"
            if on_bad_line is not None:
                on_bad_line(number, reason)
            yield RowError("json", f"line {number}: {reason}")
