"""ResourcesService registration with request decoding that never fails the call raw.

grpc's generated `add_..._to_server` decodes requests with `Message.FromString`; bytes that are
not the message make grpc itself answer UNKNOWN (unary) or INTERNAL (streams) and log a
traceback. Here a failed decode becomes an `Undecodable` value that the servicer turns into
INVALID_ARGUMENT with a BadRequest, like any other bad input.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message

from gym_metrics.environments import MAX_ROW_BYTES, row_too_large
from gym_metrics.errors import FieldViolation, InvalidInputError
from gym_metrics.v1 import resources_pb2 as pb

SERVICE = "gym_metrics.v1.ResourcesService"


@dataclass(frozen=True)
class Undecodable:
    """A request message whose bytes did not decode."""

    message_type: str
    size: int
    reason: str

    def error(self, where: str) -> InvalidInputError:
        return InvalidInputError(
            "request is not a valid protobuf message",
            [FieldViolation(where, f"{self.size} bytes that do not decode as {self.message_type} ({self.reason})")],
        )


@dataclass(frozen=True)
class Oversized:
    """A request refused from its size alone, before it was decoded: decoding (and reading
    its text as a str) holds the event loop about 5 ms a megabyte, every other call waiting."""

    refusal: InvalidInputError

    def error(self, where: str) -> InvalidInputError:
        return self.refusal


RawBound = tuple[int, Callable[[int], InvalidInputError]]
"""(the most bytes a method's request may be, the error for a request of more)."""

RAW_BOUNDS: dict[str, RawBound] = {
    # its one field is the row (a tag byte and a length of at most 5 before it)
    "SeedSession": (MAX_ROW_BYTES + 6, lambda size: row_too_large(f"a request of {size:,} bytes")),
}


def decoded(message: Any, where: str) -> Any:
    """`message`, or INVALID_ARGUMENT naming `where` when its bytes did not decode (or were
    refused undecoded)."""
    if isinstance(message, (Undecodable, Oversized)):
        raise message.error(where)
    return message


def decode_lenient(cls: type[Message], raw: bytes) -> Any:
    """`raw` decoded as `cls`, or `Undecodable` (for methods registered with raw bytes)."""
    return _lenient(cls)(raw)


SIZED = frozenset({"VerifyStream"})
"""Methods whose requests arrive as (message, its size in bytes): the stream's read-ahead
budget counts bytes, and measuring a decoded message (ByteSize) encodes it again, about 7 us
for each 8 KB row of a batch."""


def _lenient(cls: type[Message], bound: RawBound | None = None, sized: bool = False) -> Callable[[bytes], Any]:
    name = cls.DESCRIPTOR.full_name

    def decode(raw: bytes) -> Any:
        if bound is not None and len(raw) > bound[0]:
            return Oversized(bound[1](len(raw)))
        try:
            message = cls.FromString(raw)
        except (DecodeError, RecursionError, ValueError) as exc:
            return Undecodable(name, len(raw), str(exc)[:200] or type(exc).__name__)
        return (message, len(raw)) if sized else message

    return decode


Table = dict[str, tuple[Callable[..., Any], type[Message] | None, type[Message]]]
"""method -> (grpc handler factory, request type, response type). A request type of None hands
the method the raw bytes, to decode off the event loop (`decode_lenient`): a 50 MB message
takes tens of milliseconds to decode, every other call waiting meanwhile."""


def register(
    server: Any, service: str, servicer: Any, table: Table, bounds: Mapping[str, RawBound] | None = None, sized: Collection[str] = ()
) -> None:
    """Register `servicer`'s methods of `service` on `server` (sync or aio) with lenient
    decoding: bytes that are not the request type reach the method as `Undecodable`, a
    request past its method's bound in `bounds` as `Oversized`, and one of a method in `sized`
    as (message, size)."""
    handlers = {
        method: make(
            getattr(servicer, method),
            request_deserializer=None if req is None else _lenient(req, (bounds or {}).get(method), method in sized),
            response_serializer=resp.SerializeToString,
        )  # fmt: skip
        for method, (make, req, resp) in table.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))
    server.add_registered_method_handlers(service, handlers)


def add_resources_service(servicer: Any, server: Any) -> None:
    """Register `servicer`'s methods on `server` (sync or aio) with lenient decoding."""
    unary, stream = grpc.unary_unary_rpc_method_handler, grpc.stream_stream_rpc_method_handler
    register(server, SERVICE, servicer, {
        "Verify": (unary, pb.VerifyRequest, pb.VerifyResponse),
        "VerifyStream": (stream, pb.VerifyStreamRequest, pb.VerifyStreamResponse),
        "AggregateMetrics": (stream, pb.AggregateMetricsRequest, pb.AggregateMetricsResponse),
        "GetServerInfo": (unary, pb.GetServerInfoRequest, pb.GetServerInfoResponse),
        "SeedSession": (unary, pb.SeedSessionRequest, pb.SeedSessionResponse),
        "CallTool": (unary, pb.CallToolRequest, pb.CallToolResponse),
        "CloseSession": (unary, pb.CloseSessionRequest, pb.CloseSessionResponse),
        "ScoreGroups": (unary, pb.ScoreGroupsRequest, pb.ScoreGroupsResponse),
        "SessionCalls": (stream, pb.SessionCallsRequest, pb.SessionCallsResponse),
        "Step": (unary, pb.StepRequest, pb.StepResponse),
    }, RAW_BOUNDS, SIZED)  # fmt: skip


__all__ = ["SERVICE", "Oversized", "Table", "Undecodable", "add_resources_service", "decoded", "register"]


def peer_host(context: Any) -> str:
    """The calling client's address without its port (`ipv4:127.0.0.1:5000` -> `127.0.0.1`,
    `ipv6:[::1]:5000` -> `::1`, `unix:/path` as is): what a client is, for per-client bounds."""
    peer = str(context.peer() or "")
    kind, _, rest = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        host = rest.rpartition(":")[0]
        return host.strip("[]")
    return peer
