"""Server interceptors: bearer-token auth and one structured access-log line per RPC.

grpc.aio decides how to run a handler from the kind of its behaviour function (coroutine,
async generator or plain function), so every wrapper here keeps the kind of what it wraps.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import grpc
from grpc import aio

from gym_metrics._util.masking import remember

access_log = logging.getLogger("gym_metrics.access")

AUTH_EXEMPT_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
"""Probes and tooling must work without the token (Kubernetes gRPC probes send none)."""

_BEHAVIOURS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
_SERVER_FAULTS = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DATA_LOSS}

Continuation = Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]]


def _replace_behaviour(handler: grpc.RpcMethodHandler, wrap: Callable[[Any], Any]) -> grpc.RpcMethodHandler:
    """The handler with its one non-None behaviour passed through `wrap`."""
    for name in _BEHAVIOURS:
        behaviour = getattr(handler, name)
        if behaviour is not None:
            return handler._replace(**{name: wrap(behaviour)})  # type: ignore[attr-defined]
    return handler


def around(
    behaviour: Any,
    begin: Callable[[aio.ServicerContext], Any],
    end: Callable[[Any, aio.ServicerContext, BaseException | None], None],
    scope: Callable[[Any], AbstractContextManager[Any]] | None = None,
) -> Any:
    """`behaviour` with `state = begin(context)` before it and `end(state, context, failure)`
    after it (failure None when it finished), run inside `scope(state)` when given; an async
    generator stays one and a coroutine function stays one (grpc.aio picks how to run a
    handler by that). Sync behaviours (none of ours) are returned as they are."""
    enter = scope or (lambda _: nullcontext())
    if inspect.isasyncgenfunction(behaviour):

        async def stream(request: Any, context: aio.ServicerContext) -> Any:
            state, failure = begin(context), None
            try:
                with enter(state):
                    async for response in behaviour(request, context):
                        yield response
            except BaseException as exc:
                failure = exc
                raise
            finally:
                end(state, context, failure)

        return stream
    if inspect.iscoroutinefunction(behaviour):

        async def unary(request: Any, context: aio.ServicerContext) -> Any:
            state, failure = begin(context), None
            try:
                with enter(state):
                    return await behaviour(request, context)
            except BaseException as exc:
                failure = exc
                raise
            finally:
                end(state, context, failure)

        return unary
    return behaviour


class AuthInterceptor(aio.ServerInterceptor):
    """Requires `authorization: Bearer <token>` on every method but health and reflection."""

    def __init__(self, token: str) -> None:
        if not token:
            raise ValueError("auth token must be a non-empty string")
        self._expected = f"bearer {token}".encode()
        remember(token)

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method or ""
        if method.startswith(AUTH_EXEMPT_PREFIXES):
            return await continuation(handler_call_details)
        problem = self._check(handler_call_details.invocation_metadata or ())
        handler = await continuation(handler_call_details)
        if problem is None:
            return handler
        if handler is None:  # unknown method: refuse it too, so it cannot be probed
            return grpc.unary_unary_rpc_method_handler(_refuser(problem))
        # Same kind as the real handler, so a streaming call is refused before any message.
        return _replace_behaviour(handler, lambda _: _refuser(problem))

    def _check(self, metadata: Any) -> str | None:
        """None when authorized, else the reason (never echoing what the client sent)."""
        values = [v for k, v in metadata if k.lower() == "authorization"]
        if not values:
            return "missing 'authorization: Bearer <token>' metadata"
        value = values[0]
        given = value if isinstance(value, bytes) else str(value).encode()
        scheme, _, rest = given.partition(b" ")
        candidate = scheme.lower() + b" " + rest.strip()
        if not hmac.compare_digest(candidate, self._expected):
            return "invalid bearer token"
        return None


def _refuser(message: str) -> Callable[[Any, aio.ServicerContext], Awaitable[None]]:
    async def refuse(request: Any, context: aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    return refuse


class AccessLogInterceptor(aio.ServerInterceptor):
    """Logs one JSON object per finished RPC: method, code, duration_ms, peer.

    Calls refused before the handler runs (unknown method, message too large, server
    overloaded) never reach a handler and so are not logged here.
    """

    def __init__(self, logger: logging.Logger = access_log) -> None:
        self._logger = logger

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None or not self._logger.isEnabledFor(logging.INFO):
            return handler
        method = handler_call_details.method or ""
        return _replace_behaviour(handler, lambda behaviour: self._wrap(method, behaviour))

    def _wrap(self, method: str, behaviour: Any) -> Any:
        def begin(context: aio.ServicerContext) -> tuple[float, str]:
            return time.perf_counter(), context.peer()

        def end(state: tuple[float, str], context: aio.ServicerContext, failure: BaseException | None) -> None:
            self._log(method, _code_of(context, failure), state[0], state[1], context)

        return around(behaviour, begin, end)

    def _log(self, method: str, code: grpc.StatusCode, start: float, peer: str, context: Any) -> None:
        record: dict[str, Any] = {
            "event": "rpc",
            "method": method,
            "code": code.name,
            "duration_ms": round((time.perf_counter() - start) * 1000, 3),
            "peer": peer,
        }
        if code is not grpc.StatusCode.OK:
            details = _details_of(context)
            if details:
                record["details"] = details[:300]
        level = logging.WARNING if code in _SERVER_FAULTS else logging.INFO
        self._logger.log(level, json.dumps(record), extra={"grpc": record})


def _code_of(context: Any, exc: BaseException | None) -> grpc.StatusCode:
    """The status the client will see, as far as the handler's outcome tells."""
    code = _safe(context.code)
    if isinstance(exc, (asyncio.CancelledError, GeneratorExit)):
        remaining = _safe(context.time_remaining)
        return grpc.StatusCode.DEADLINE_EXCEEDED if remaining is not None and remaining <= 0 else grpc.StatusCode.CANCELLED
    if isinstance(code, grpc.StatusCode):
        return code
    return grpc.StatusCode.OK if exc is None else grpc.StatusCode.UNKNOWN


def _details_of(context: Any) -> str:
    details = _safe(context.details)
    if isinstance(details, bytes):
        details = details.decode("utf-8", "replace")
    return details or ""


def _safe(getter: Callable[[], Any]) -> Any:
    try:
        return getter()
    except Exception:  # experimental context accessors: never let logging break a call
        return None


async def _unimplemented(requests: Any, context: aio.ServicerContext) -> AsyncIterator[Any]:
    """grpc's own answer to an unknown method. A stream handler reads no request, so it fits
    a call of any kind (a unary handler would wait for a message a streaming client may not send)."""
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
    yield  # pragma: no cover  (an async generator: grpc.aio runs it as a streaming behaviour)


class MetricsInterceptor(aio.ServerInterceptor):
    """Counts every RPC by method and status code, with its duration and the calls in flight
    (`serve --prometheus-port`), a call to a method the server lacks too (UNIMPLEMENTED).
    `metrics` is a ServerMetrics; method names outside our services become "unknown" (no
    label from what a client made up)."""

    def __init__(self, metrics: Any) -> None:
        self._metrics = metrics

    async def intercept_service(
        self, continuation: Continuation, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:  # no such method: answered as grpc would, but counted (as "unknown")
            handler = grpc.stream_stream_rpc_method_handler(_unimplemented)
        method = self._metrics.method(handler_call_details.method or "")
        return _replace_behaviour(handler, lambda behaviour: self._wrap(method, behaviour))

    def _wrap(self, method: str, behaviour: Any) -> Any:
        metrics, in_flight = self._metrics, self._metrics.in_flight.labels(method)

        def done(start: float, context: Any, exc: BaseException | None) -> None:
            in_flight.dec()
            code = _code_of(context, exc).name
            metrics.rpcs.labels(method, code).inc()
            metrics.latency.labels(method, code).observe(time.perf_counter() - start)

        def begin(context: aio.ServicerContext) -> float:
            in_flight.inc()
            return time.perf_counter()

        return around(behaviour, begin, done)
