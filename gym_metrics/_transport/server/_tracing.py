"""OpenTelemetry SERVER spans per RPC, when tracing is on (see gym_metrics._transport._tracing)."""

from __future__ import annotations

from typing import Any

import grpc
from grpc import aio

from gym_metrics._transport._tracing import end_span, rpc_attributes, tracer
from gym_metrics._transport.server._interceptors import _code_of, _replace_behaviour, around


class TracingInterceptor(aio.ServerInterceptor):
    """A SERVER span per RPC, child of the context the client sent in its metadata."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None:
            return None
        from opentelemetry import propagate

        carrier = {k: v for k, v in (details.invocation_metadata or ()) if isinstance(v, str)}
        parent = propagate.extract(carrier)
        method = details.method or ""
        return _replace_behaviour(handler, lambda behaviour: self._wrap(method, parent, behaviour))

    def _wrap(self, method: str, parent: Any, behaviour: Any) -> Any:
        from opentelemetry import trace

        tracer = self._tracer

        def begin(context: aio.ServicerContext) -> Any:
            return tracer.start_span(method.lstrip("/"), context=parent, kind=trace.SpanKind.SERVER, attributes=rpc_attributes(method))

        def end(span: Any, context: aio.ServicerContext, failure: BaseException | None) -> None:
            end_span(span, _code_of(context, failure))

        return around(behaviour, begin, end, scope=lambda span: trace.use_span(span, end_on_exit=False))


def server_interceptor() -> aio.ServerInterceptor | None:
    """The server's tracing interceptor, or None when tracing is off."""
    active = tracer()
    return None if active is None else TracingInterceptor(active)


__all__ = ["TracingInterceptor", "server_interceptor"]
