"""Model-call capture: every HTTP exchange with the policy (each attempt, a failed one too),
timed, while a caller collects them (`with capturing() as calls:` around its generations).

What is kept is what went over the wire: the JSON body sent (never the key: it travels in a
header), the parsed answer (the key masked, as callers see it) or the error's message, the
status, wall-clock bounds and the duration. gym_metrics.recording turns them into NeMo Gym's
model-call records. Nothing is kept when no caller collects (a context variable, so
concurrent episodes never mix their calls).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

_CALLS: contextvars.ContextVar[ModelCalls | None] = contextvars.ContextVar("gym_metrics_model_calls", default=None)
_LABELS: contextvars.ContextVar[tuple[Any, str | None, list[Exchange]] | None] = contextvars.ContextVar("gym_metrics_model_call_labels", default=None)


@dataclass
class Exchange:
    """One HTTP exchange with the policy."""

    dialect: str
    """`chat` or `responses`: the API the body was sent to."""
    request: Any
    started_at: float
    """UTC Unix seconds when it was sent (for traces; durations use `latency_ms`)."""
    completed_at: float = 0.0
    latency_ms: float = 0.0
    status_code: int | None = None
    error_category: str | None = None
    response: Any = None
    """The parsed answer (a 2xx one), None when there is none."""
    error: str | None = None
    """Why there is no answer (the error's message, the key masked)."""
    model_ref: Any = None
    """The model server a NeMo Gym agent addressed ({"type": "responses_api_models", "name": ...})."""
    client_session_id: str | None = None
    """The session the caller sent the call under (its `x-session-id` header)."""
    ttft_ms: float | None = None
    """Milliseconds from sending to the answer's first byte (None where not timed)."""
    masked: bool = False
    """The answer spelled the API key: masked, its token IDs and log-probs dropped (they spell it too)."""


@dataclass
class ModelCalls:
    """The exchanges made while collecting, in the order they were sent."""

    exchanges: list[Exchange] = field(default_factory=list)


@contextmanager
def capturing() -> Iterator[ModelCalls]:
    """Collect the policy calls made in this context (and the tasks it starts)."""
    calls = ModelCalls()
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


@contextmanager
def labelled(model_ref: Any, client_session_id: str | None) -> Iterator[list[Exchange]]:
    """The calls made in this context are recorded as sent to `model_ref` under `client_session_id`
    (a NeMo Gym agent's call to its model server, as that server would record it); the list
    yielded gets the exchanges begun here, for the caller to record them as that server would."""
    begun: list[Exchange] = []
    token = _LABELS.set((model_ref, client_session_id, begun))
    try:
        yield begun
    finally:
        _LABELS.reset(token)


def begin(dialect: str, request: Any) -> Exchange | None:
    """A new exchange, when a caller collects; None otherwise (nothing to do)."""
    calls = _CALLS.get()
    if calls is None:
        return None
    exchange = Exchange(dialect, request, time.time())
    labels = _LABELS.get()
    if labels is not None:
        exchange.model_ref, exchange.client_session_id, begun = labels
        begun.append(exchange)
    calls.exchanges.append(exchange)
    return exchange


def end(exchange: Exchange, start: float, status: int | None, *, error: BaseException | None = None) -> None:
    """Close `exchange` (`start`: its perf_counter at sending)."""
    exchange.latency_ms = round((time.perf_counter() - start) * 1000, 2)
    exchange.completed_at = time.time()
    exchange.status_code = status
    if error is not None:
        exchange.error = str(error)
        exchange.error_category = error_category(status, error)
    elif status is not None:
        exchange.error_category = error_category(status, None)


def error_category(status: int | None, error: BaseException | None) -> str | None:
    """NeMo Gym's error categories: from the HTTP status when there is one (None below 400),
    else from the failure (a timeout, a connection, anything else an `exception`)."""
    if status is not None:
        if status < 400:
            return None
        if status in (408, 504):
            return "timeout"
        return {429: "rate_limit", 401: "auth", 403: "auth", 404: "not_found"}.get(status, "client_error" if status < 500 else "upstream_error")
    if error is None:
        return None
    text = f"{type(error).__name__} {error}".lower()
    if "timed out" in text or "timeout" in text:
        return "timeout"
    if "unreachable" in text or "conn" in text:
        return "connection"
    return "exception"
