"""The one place exceptions become gRPC status codes.

InvalidInputError -> INVALID_ARGUMENT with a google.rpc.BadRequest naming each field and row;
NotFoundError -> NOT_FOUND; OverloadedError -> RESOURCE_EXHAUSTED; NotReadyError ->
FAILED_PRECONDITION; UnavailableError -> UNAVAILABLE; anything else -> INTERNAL
with the exception's type and message only (the traceback stays in the server log).
"""

from __future__ import annotations

import asyncio

import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any, TypeVar

import grpc
import grpc.aio
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from gym_metrics.errors import (
    FieldViolation,
    GymMetricsError,
    InvalidInputError,
    NotFoundError,
    NotReadyError,
    OverloadedError,
    UnavailableError,
    UserCodeError,
)

log = logging.getLogger("gym_metrics.transport")

# Status details travel in a trailer; gRPC's default metadata limit is 8 KiB.
_MAX_VIOLATIONS = 20
_MAX_DESCRIPTION = 300
_MAX_MESSAGE = 1000

F = TypeVar("F", bound=Callable[..., Any])


def field_path(v: FieldViolation) -> str:
    """BadRequest field (docs/grpc.md#errors): the violation's path, with its position in the
    repeated field it names when known (`request[1].batch.rollout_index[3]`); a line of a file
    as `[line N]`."""
    if v.row is None:
        return v.field
    return f"{v.field}[{v.row}]" if getattr(v, "row_name", "row") == "row" else f"{v.field}[{v.row_name} {v.row}]"


def to_status(exc: BaseException) -> grpc.Status:
    """The gRPC status (with rich details) an exception maps to."""
    return rpc_status.to_status(status_of(exc))


def status_of(exc: BaseException) -> status_pb2.Status:
    """The google.rpc.Status an exception maps to (see the module docstring)."""
    if isinstance(exc, InvalidInputError):
        bad = error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(
                    field=field_path(v), description=_clip(v.description, _MAX_DESCRIPTION)
                )
                for v in exc.violations[:_MAX_VIOLATIONS]
            ]
        )
        detail = any_pb2.Any()
        detail.Pack(bad)
        status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=_clip(str(exc), _MAX_MESSAGE), details=[detail])
    elif isinstance(exc, NotFoundError):
        status = status_pb2.Status(code=code_pb2.NOT_FOUND, message=_clip(str(exc), _MAX_MESSAGE))
    elif isinstance(exc, OverloadedError):
        status = status_pb2.Status(code=code_pb2.RESOURCE_EXHAUSTED, message=_clip(str(exc), _MAX_MESSAGE))
        if exc.retry_after_s is not None:
            retry = error_details_pb2.RetryInfo()
            retry.retry_delay.FromNanoseconds(int(exc.retry_after_s * 1e9))
            status.details.add().Pack(retry)
    elif isinstance(exc, NotReadyError):
        status = status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message=_clip(str(exc), _MAX_MESSAGE))
    elif isinstance(exc, UnavailableError):
        status = status_pb2.Status(code=code_pb2.UNAVAILABLE, message=_clip(str(exc), _MAX_MESSAGE))
    elif isinstance(exc, UserCodeError):
        status = status_pb2.Status(code=code_pb2.INTERNAL, message=_clip(str(exc), _MAX_MESSAGE))
    else:
        status = status_pb2.Status(code=code_pb2.INTERNAL, message=_clip(f"{type(exc).__name__}: {exc}", _MAX_MESSAGE))
    return status


async def abort(context: grpc.aio.ServicerContext, exc: BaseException, method: str) -> None:
    """Log `exc` as it deserves and end the call with its status (raises AbortError)."""
    status = to_status(exc)
    if status.code is grpc.StatusCode.INTERNAL:
        log.error("%s failed", method, exc_info=exc)
    else:
        log.info("%s: %s: %s", method, status.code.name, status.details)
    await context.abort_with_status(status)


async def _drain(requests: Any, seconds: float = 2.0) -> None:
    """Read what the client is still sending before refusing the call: a status sent while
    its writes are in flight reaches it as a bare INTERNAL instead of our precise error.
    Bounded in time; a client that keeps sending just gets the status a little later."""

    async def read_all() -> None:
        async for _ in requests:
            pass

    try:
        await asyncio.wait_for(read_all(), seconds)
    except Exception:  # a broken or endless stream: refuse it now
        pass


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def grpc_errors(fn: F) -> F:
    """Decorate a servicer method (coroutine or async generator) so exceptions map to status."""
    name = fn.__name__
    if inspect.isasyncgenfunction(fn):

        @functools.wraps(fn)
        async def gen_wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                async for item in fn(self, request, context):
                    yield item
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                if hasattr(request, "__aiter__") and isinstance(exc, GymMetricsError):
                    await _drain(request)
                await abort(context, exc, name)

        return gen_wrapper  # type: ignore[return-value]

    @functools.wraps(fn)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await fn(self, request, context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await abort(context, exc, name)

    return wrapper  # type: ignore[return-value]


__all__ = ["abort", "field_path", "grpc_errors", "to_status"]
