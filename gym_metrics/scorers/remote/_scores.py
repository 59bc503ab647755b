"""Scores read from the endpoint's JSON answer with JSONPath (jsonpath-ng)."""

from __future__ import annotations

import math
from typing import Any

from gym_metrics._util.jsonpath import compile_path
from gym_metrics.scorers import RowError


def read_score(data: Any, name: str, path: str) -> float:
    """The score at `path`, read as NeMo Evaluator SDK reads it (Python's `float()` of the
    first match): NaN when the path matches nothing; with several matches the first one; a
    boolean is 1.0 / 0.0; a number or a string `float()` reads (`"0.75"`, `" 1e-3 "`,
    `"nan"`) is that number. Where the SDK's `float()` fails the row (null, other text, an
    object, a list, an integer too large for a float) it is a row error on `response.<name>`."""
    matches = compile_path(path).find(data)
    if not matches:
        return math.nan
    value = matches[0].value
    if value is None:
        raise RowError(f"response.{name}", f"{path} is null, not a number")
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float, str)):
        try:
            return float(value)
        except OverflowError:
            raise RowError(f"response.{name}", f"{path} is an integer too large for a float") from None
        except ValueError:
            pass
    shown = repr(value)
    raise RowError(f"response.{name}", f"{path} is not a number: {shown[:100]}")
