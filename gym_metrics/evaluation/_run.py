"""evaluate(): score a dataset of rows with a row metric, concurrently, never aborting on a row.

Each row's `score()` coroutine is started eagerly: a CPU-only metric finishes on its first
step and costs no Task (one code path for every metric, no per-row Task overhead); a metric
that awaits I/O (a judge) is handed to a Task, with at most `parallelism` rows in flight.
With a `target` (online evaluation, gym_metrics/evaluation/_online.py) each row's response
is generated first.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from gym_metrics._util.eager import start_eagerly
from gym_metrics._util.run_sync import run_sync
from gym_metrics.errors import InvalidInputError
from gym_metrics.evaluation._progress import RowProgress, Tallied
from gym_metrics.evaluation._result import EvaluationScores, RowFailure, ScoreMatrix
from gym_metrics.evaluation._row import Outcome, score_row
from gym_metrics.scorers import RowError, Scorer, get_scorer

if TYPE_CHECKING:
    from gym_metrics.evaluation._online import TargetSpec, TemplateSpec, ToolEnvironment

YIELD_EVERY_ROWS, YIELD_SECONDS = 64, 0.05
"""Rows that finish eagerly (a CPU-only scorer) give the event loop a turn at least every
YIELD_SECONDS, checked every YIELD_EVERY_ROWS rows: a cancellation is then delivered within
about that long, not when the whole dataset has been scored."""


def evaluate(
    scorer: Scorer | str,
    dataset: Iterable[Mapping[str, Any] | RowError],
    *,
    config: Mapping[str, Any] | None = None,
    parallelism: int = 16,
    limit_samples: int | None = None,
    target: TargetSpec | None = None,
    prompt_template: TemplateSpec | None = None,
    progress: RowProgress | None = None,
    tools: ToolEnvironment | None = None,
    capture_model_calls: bool = False,
) -> EvaluationScores:
    """Score every row of `dataset` with `scorer`; see `evaluate_async`.

    Safe to call from code already running an event loop (e.g. a notebook): the run then gets
    its own loop in a worker thread.
    """
    coro = evaluate_async(
        scorer, dataset, config=config, parallelism=parallelism, limit_samples=limit_samples,
        target=target, prompt_template=prompt_template, progress=progress, tools=tools,
        capture_model_calls=capture_model_calls,
    )  # fmt: skip
    return run_sync(coro)


async def evaluate_async(
    scorer: Scorer | str,
    dataset: Iterable[Mapping[str, Any] | RowError],
    *,
    config: Mapping[str, Any] | None = None,
    parallelism: int = 16,
    limit_samples: int | None = None,
    target: TargetSpec | None = None,
    prompt_template: TemplateSpec | None = None,
    progress: RowProgress | None = None,
    tools: ToolEnvironment | None = None,
    capture_model_calls: bool = False,
) -> EvaluationScores:
    """Score every row of `dataset` with `scorer` (an instance, or a registered name plus
    `config`), at most `parallelism` rows at a time, the first `limit_samples` rows only if
    given. Rows are read lazily, so a file-backed dataset is never held in memory.

    With `target` (a TARGET.json path, its dict, or a target config) each row's response is
    generated first, from `prompt_template` (NeMo Evaluator's `{"messages": [...]}`, a dict or
    a JSON file path) rendered over the row; see docs/evaluation.md#online-evaluation. With
    `tools` too (a ToolEnvironment), each generation is a multi-turn episode over that
    environment's tools, and the trajectory is what is scored. `capture_model_calls`: each
    row's `generated` also holds NeMo Gym's `ng_model_call_capture` of its policy calls.

    A row that raises (RowError or anything else) gets NaN scores and its error; a dataset item
    that is itself a RowError (e.g. an unreadable JSONL line) is recorded the same way. The
    scorer's `aclose()` is called once at the end. `progress` (a RowProgress) is told of
    every row as it finishes; the caller closes it.
    """
    if parallelism < 1:
        raise InvalidInputError(f"parallelism must be >= 1, got {parallelism}")
    if limit_samples is not None and limit_samples < 0:
        raise InvalidInputError(f"limit_samples must be >= 0, got {limit_samples}")
    if prompt_template is not None and target is None:
        raise InvalidInputError("prompt_template goes with a target: it builds the request sent to the model")
    if tools is not None and target is None:
        raise InvalidInputError("tools go with a target: the episode's policy is the target")
    if capture_model_calls and target is None:
        raise InvalidInputError("capture_model_calls goes with a target: it records the target's calls")
    if isinstance(scorer, str):
        scorer = get_scorer(scorer, config)
    elif config is not None:
        raise InvalidInputError("config goes with a scorer's name; an instance is already configured")
    try:
        rows = dataset if limit_samples is None else islice(dataset, limit_samples)
        return await _score_all(scorer, rows, parallelism, target, prompt_template, progress, tools, capture_model_calls)
    finally:
        await scorer.aclose()


class RowSink(Protocol):
    """Where finished rows go. A row `held` (added, not yet durable) keeps its slot in
    `parallelism` until `release()`, so at most `parallelism` rows are ever scored and
    unsaved at once (a durable job loses no more than that when its process dies)."""

    @property
    def held(self) -> int: ...

    def add(self, index: int, scores: Mapping[str, Any] | None, failure: RowFailure | None, generated: Mapping[str, Any] | None = None) -> None: ...

    def release(self) -> None: ...


async def score_rows(
    metric: Scorer,
    rows: Iterable[tuple[int, Any]],
    sink: RowSink,
    *,
    parallelism: int = 16,
    target: TargetSpec | None = None,
    prompt_template: TemplateSpec | None = None,
    tools: ToolEnvironment | None = None,
    capture_model_calls: bool = False,
) -> None:
    """Score `(index, row)` pairs into `sink` as each finishes (any order), at most
    `parallelism` rows in flight; `evaluate_async` without collecting, for callers that
    store rows as they land (durable jobs). The caller owns and closes `metric`."""
    if target is None:
        await _feed(metric, rows, sink, parallelism)
        return
    from gym_metrics.evaluation._online import Online

    online = Online(metric, target, prompt_template, tools, capture_model_calls)
    try:
        if tools is not None:  # unreachable: the run's error (exit 4), not every row's
            await online.environment()
        in_flight = max(parallelism, online.max_concurrency)
        await _feed(metric, rows, sink, in_flight, lambda row: online.score(metric, row), eager=False)
    finally:
        await online.aclose()


async def _score_all(
    metric: Scorer, rows: Iterable[Any], parallelism: int, target: TargetSpec | None, prompt_template: TemplateSpec | None,
    progress: RowProgress | None, tools: ToolEnvironment | None = None, capture_model_calls: bool = False,
) -> EvaluationScores:  # fmt: skip
    scores = ScoreMatrix(metric.score_names)
    counted = _Counted(rows)
    sink: RowSink = scores if progress is None else Tallied(scores, progress)
    await score_rows(
        metric, counted, sink, parallelism=parallelism, target=target, prompt_template=prompt_template, tools=tools,
        capture_model_calls=capture_model_calls,
    )  # fmt: skip
    return scores.result(metric.name or type(metric).__name__, counted.n)


class _Counted:
    """enumerate() that remembers how many rows it gave (failed trailing rows count too)."""

    def __init__(self, rows: Iterable[Any]) -> None:
        self.rows, self.n = rows, 0

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        for self.n, row in enumerate(self.rows, 1):
            yield self.n - 1, row


async def _feed(
    metric: Scorer,
    rows: Iterable[tuple[int, Any]],
    sink: RowSink,
    parallelism: int,
    score: Callable[[Mapping[str, Any]], Coroutine[Any, Any, Outcome]] | None = None,
    eager: bool | None = None,
) -> None:
    """Rows scored by `score(row)` (default: the metric's), at most `parallelism` at a time
    counting those the sink holds unsaved."""
    pending: dict[asyncio.Future[Outcome], int] = {}
    score_one = score or (lambda row: score_row(metric, row))
    eager_rows, last_yield = 0, time.monotonic()
    trusted = metric.eager if eager is None else eager

    async def drain(until: int) -> None:
        while len(pending) > until:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for future in done:
                sink.add(pending.pop(future), *future.result())

    try:
        for index, row in rows:
            if isinstance(row, RowError):
                sink.add(index, None, RowFailure(row.field, row.reason))
            elif not isinstance(row, Mapping):
                sink.add(index, None, RowFailure("row", f"must be an object, got {type(row).__name__}"))
            else:
                while len(pending) + sink.held >= parallelism:  # a drain can add held rows: check again
                    if sink.held:
                        sink.release()
                    else:
                        await drain(len(pending) - 1)
                done, value = start_eagerly(score_one(row), trusted=trusted)
                if done:
                    sink.add(index, *value)
                    eager_rows += 1
                    if not eager_rows % YIELD_EVERY_ROWS and time.monotonic() - last_yield >= YIELD_SECONDS:
                        await asyncio.sleep(0)  # a cancel (job cancel, SIGTERM) lands here
                        last_yield = time.monotonic()
                else:
                    pending[value] = index  # type: ignore[index]
        await drain(0)
    except BaseException:  # the dataset failed (e.g. an unreadable file) or we were cancelled
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        raise
