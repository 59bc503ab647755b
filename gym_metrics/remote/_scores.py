"""Scores read from the endpoint's JSON answer with JSONPath (jsonpath-ng)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from jsonpath_ng import JSONPath
from jsonpath_ng.ext import parse

from gym_metrics.evaluate import RowError


@lru_cache(maxsize=256)
def compile_path(path: str) -> JSONPath:
    """The parsed JSONPath; ValueError with the parser's message when it is not one."""
    try:
        return parse(path)
    except Exception as exc:  # noqa: BLE001  # jsonpath-ng raises its own lexer/parser errors (no common base)
        raise ValueError(f"not a JSONPath: {path!r}: {exc}") from None


def read_score(data: Any, name: str, path: str) -> float:
    """The number at `path`: NaN when the path matches nothing (or null); a number or a
    numeric string is accepted; anything else (text, a bool, an object, several matches)
    is a row error."""
    matches = compile_path(path).find(data)
    if not matches:
        return math.nan
    if len(matches) > 1:
        raise RowError(f"response.{name}", f"{path} matched {len(matches)} values, expected one")
    value = matches[0].value
    if value is None:
        return math.nan
    if isinstance(value, bool):
        raise RowError(f"response.{name}", f"{path} is a boolean ({value}), not a number")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    shown = repr(value)
    raise RowError(f"response.{name}", f"{path} is not a number: {shown[:100]}")
