"""evaluate through a running environment (`evaluate --server`): rows are verify bodies.

Each row is sent as one verify request over a single VerifyStream call (row index = task
index, rollout 0); the environment's verify returns the scores as response fields. Which
fields are scores is read once from GetServerInfo's verify response schema: every property
typed number or integer (nullable allowed) except `reward`; an environment declaring none
(e.g. math_exact) is scored by `reward`. A field missing or null in a response is NaN; a
failed verify (rejected body, error in verify, timeout) is that row's error.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

import orjson

from gym_metrics._transport.client import ResourcesClient
from gym_metrics.errors import InvalidInputError
from gym_metrics.evaluation._progress import RowProgress, Tallied
from gym_metrics.evaluation._result import EvaluationScores, RowFailure, ScoreMatrix
from gym_metrics.scorers import RowError

REWARD = "reward"


async def evaluate_remote_async(
    target: str | ResourcesClient,
    dataset: Iterable[Mapping[str, Any] | RowError],
    *,
    limit_samples: int | None = None,
    batch_size: int = 256,
    token: str | None = None,
    tls_ca: str | Path | bytes | bool | None = None,
    progress: RowProgress | None = None,
) -> EvaluationScores:
    """Score `dataset` through the environment at `target` ("host:port", or an open client
    whose connection the caller keeps); `progress` is told of every row as it finishes.

    The result is named after the environment (GetServerInfo's name)."""
    if limit_samples is not None and limit_samples < 0:
        raise InvalidInputError(f"limit_samples must be >= 0, got {limit_samples}")
    rows = dataset if limit_samples is None else islice(dataset, limit_samples)
    if isinstance(target, ResourcesClient):
        return await _score(target, rows, batch_size, progress)
    async with ResourcesClient(target, token=token, tls_ca=tls_ca) as client:
        return await _score(client, rows, batch_size, progress)


async def _score(
    client: ResourcesClient, rows: Iterable[Mapping[str, Any] | RowError], batch_size: int, progress: RowProgress | None
) -> EvaluationScores:
    info = await client.server_info()
    names = score_fields(info.verify_response_schema)
    matrix = ScoreMatrix(names)
    scores: ScoreMatrix | Tallied = matrix if progress is None else Tallied(matrix, progress)
    count = 0

    def items() -> Iterator[tuple[int, int, bytes]]:
        nonlocal count
        for index, row in enumerate(rows):
            count = index + 1
            if isinstance(row, RowError):
                scores.add(index, None, RowFailure(row.field, row.reason))
            elif not isinstance(row, Mapping):
                scores.add(index, None, RowFailure("row", f"must be an object, got {type(row).__name__}"))
            else:
                try:
                    body = orjson.dumps(row, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)
                except (TypeError, ValueError) as exc:  # e.g. a lone surrogate Python's json read
                    scores.add(index, None, RowFailure("row", f"cannot be sent as JSON: {exc}"))
                    continue
                yield index, 0, body

    async for outcome in client.verify_stream(items(), batch_size=batch_size, answer_each=True):  # as they finish: rows are keyed
        if outcome.error_kind or outcome.response is None:
            reason = f"{outcome.error_kind or 'no response'}: {outcome.error_message}"
            scores.add(outcome.task_index, None, RowFailure("verify", reason))
        else:
            scores.add(outcome.task_index, {n: _number(outcome.response.get(n)) for n in names}, None)
    return matrix.result(info.name, count)


def score_fields(response_schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The numeric properties of a verify response schema except `reward`; else `reward`."""
    properties = response_schema.get("properties") or {}
    names = tuple(name for name, prop in properties.items() if name != REWARD and _numeric(prop))
    return names or (REWARD,)


def _numeric(prop: Mapping[str, Any]) -> bool:
    """Typed number or integer, alone or among alternatives (`anyOf`, a list of types)."""
    options = [prop, *(p for p in prop.get("anyOf", ()) if isinstance(p, Mapping))]
    for option in options:
        kind = option.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        if "number" in kinds or "integer" in kinds:
            return True
    return False


def _number(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float("nan")
