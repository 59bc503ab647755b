"""The environment's aggregation hooks called by name: what one raises or answers amiss is
an error naming the hook (`compute_metrics raised KeyError: 'score'`), not a bare exception
from inside the engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

from gym_metrics.errors import GymMetricsError, UserCodeError


def called(name: str, hook: Callable[..., Any], *args: Any) -> Any:
    """`hook(*args)`; a dict, an absent answer (None) as {}, else UserCodeError naming `name`."""
    try:
        answer = hook(*args)
    except GymMetricsError:
        raise
    except (Exception, SystemExit, KeyboardInterrupt, GeneratorExit) as exc:  # (errors.code_failed: each would end the server or the call)
        raise UserCodeError(name, exc) from exc
    if answer is None:
        return {}
    if not isinstance(answer, Mapping):
        raise UserCodeError(name, TypeError(f"it returned {type(answer).__name__}; expected a dict of metric names to values"))
    for key, value in answer.items():  # the metrics file holds them: one JSON cannot was an internal error naming neither hook nor key
        if not isinstance(key, str):
            raise UserCodeError(name, TypeError(f"its key {key!r} is not a str: metric names are text"))
        try:
            orjson.dumps(value[:100] if isinstance(value, list) else value, option=orjson.OPT_SERIALIZE_NUMPY)  # (a long list: its head)
        except TypeError as exc:
            raise UserCodeError(name, TypeError(f"its {key!r} is a {type(value).__name__}, which the metrics file (JSON) cannot hold: {exc}")) from None
    return answer
