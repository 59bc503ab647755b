"""OpenTelemetry tracing of RPCs, when `opentelemetry` is installed and the process has a
tracer provider configured (an SDK set up by the application, or `opentelemetry-instrument`):
a CLIENT span per call in the collector, its context sent in the call's metadata (W3C
`traceparent`), and a SERVER span per call in the server, its child. Without either, nothing
is added to any call.

Span attributes follow the RPC semantic conventions: rpc.system, rpc.service, rpc.method,
rpc.grpc.status_code; no request content, peer or token."""

from __future__ import annotations

import importlib.util
from typing import Any

import grpc
from grpc import aio

TRACER_NAME = "gym_metrics"


def tracer() -> Any:
    """The tracer of a configured provider; None when opentelemetry is missing or no provider
    is configured (the API's default proxy traces nothing: no work is spent on it then)."""
    try:
        if importlib.util.find_spec("opentelemetry") is None:
            return None
    except ValueError:  # set to None in sys.modules (how tests hide it)
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider.get_tracer(TRACER_NAME)


def rpc_attributes(method: str) -> dict[str, str]:
    service, _, name = method.lstrip("/").partition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}


def end_span(span: Any, code: grpc.StatusCode) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code is not grpc.StatusCode.OK:
        span.set_status(Status(StatusCode.ERROR, code.name))
    span.end()


class _ClientTracing:
    """A CLIENT span per call, injected into the call's metadata; ended when the call is."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer

    def _start(self, details: aio.ClientCallDetails) -> tuple[Any, aio.ClientCallDetails]:
        from opentelemetry import propagate, trace

        method = details.method.decode() if isinstance(details.method, bytes) else str(details.method)
        span = self._tracer.start_span(method.lstrip("/"), kind=trace.SpanKind.CLIENT, attributes=rpc_attributes(method))
        carrier: dict[str, str] = {}
        propagate.inject(carrier, context=trace.set_span_in_context(span))
        metadata = aio.Metadata(*(details.metadata or ()), *carrier.items())
        return span, details._replace(metadata=metadata)  # type: ignore[attr-defined]

    @staticmethod
    def _end_with(span: Any, call: Any) -> Any:
        def done(finished: Any) -> None:
            try:
                code = finished.code()
                code = code if isinstance(code, grpc.StatusCode) else grpc.StatusCode.UNKNOWN
            except Exception:  # cancelled before a status
                code = grpc.StatusCode.CANCELLED
            end_span(span, code)

        call.add_done_callback(done)
        return call


class _UnaryUnary(_ClientTracing, aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, details: aio.ClientCallDetails, request: Any) -> Any:
        span, details = self._start(details)
        return self._end_with(span, await continuation(details, request))


class _StreamStream(_ClientTracing, aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Any, details: aio.ClientCallDetails, request_iterator: Any) -> Any:
        span, details = self._start(details)
        return self._end_with(span, await continuation(details, request_iterator))


def client_interceptors() -> list[aio.ClientInterceptor] | None:
    """The channel's tracing interceptors, or None when tracing is off (then the channel is
    made exactly as without this module)."""
    active = tracer()
    return None if active is None else [_UnaryUnary(active), _StreamStream(active)]


__all__ = ["client_interceptors", "end_span", "rpc_attributes", "tracer"]
